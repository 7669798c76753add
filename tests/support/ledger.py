"""Builders for send-ledger tests: sample event data, payloads and hand-made hash chains."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec
from msgspec import UNSET

from ledger.chain import event_hash, event_mac, genesis
from ledger.lifecycle import State
from schemas.ledger import Event, LedgerEntry, PreparedPayload, encode_event
from schemas.ledger_events import (
    ApprovalRefused,
    ApprovalRequested,
    Approved,
    Claimed,
    ConfirmRefused,
    DispatchAborted,
    DispatchQueued,
    DuplicateConfirm,
    EventData,
    Expired,
    LateOutcomeObserved,
    OperatorResolution,
    OutcomeEvidence,
    Prepared,
    RecoveryClassified,
    RollbackQuarantined,
    SentFilingFailed,
    SentFilingStarted,
    SentFilingSucceeded,
    SmtpAccepted,
    SmtpAttemptStarted,
    SmtpCommitPoint,
    SmtpOutcomeUnknown,
    SmtpRejected,
)
from schemas.send_policy import ApprovalMode, RequiredApproval

PID = "0123456789abcdef0123456789abcdef"
OWNER = "a1" * 32
OTHER_OWNER = "b2" * 32
DIGEST = "d4" * 32
T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z
TTL_MS = 900_000
DISPATCHER = "c3" * 16
EIDS = [f"{n:032x}" for n in range(1, 200)]


def prepared(
    *,
    expires_ms: int = T0 + TTL_MS,
    owner: str = OWNER,
    approval: RequiredApproval | None = None,
) -> Prepared:
    """A `prepared` data object for PID (requiring `approval` before the claim, when given)."""
    return Prepared(
        owner=owner,
        digest=DIGEST,
        message_id=f"<{PID}@example.test>",
        transport="smtp",
        action="new",
        created_ms=expires_ms - TTL_MS,
        expires_ms=expires_ms,
        encoded_bytes=1234,
        recipient_count=2,
        attachment_sha256=("e5" * 32,),
        payload_sha256="f6" * 32,
        approval=UNSET if approval is None else approval,
    )


def approved(mode: ApprovalMode = "elicitation") -> Approved:
    """An `approved` data object: a person approved by `mode` (a passkey names its credential)."""
    return Approved(
        mode=mode,
        client_name="test-client" if mode == "elicitation" else "",
        client_version="1.0.0" if mode == "elicitation" else "",
        protocol="2025-06-18" if mode == "elicitation" else "",
        shown_sha256="a7" * 32,
        credential_sha256="c8" * 32 if mode == "passkey" else UNSET,
    )


def claimed(*, append_sent: bool = False, dispatcher_id: str = DISPATCHER) -> Claimed:
    """A `claimed` data object confirming DIGEST."""
    return Claimed(
        dispatcher_id=dispatcher_id,
        claim_token="9" * 32,
        confirmed_digest=DIGEST,
        append_sent=append_sent,
    )


ATTEMPT = SmtpAttemptStarted(
    transport="smtp", endpoint="smtp.example.test:465", tls_mode="tls", auth="plain"
)
COMMIT = SmtpCommitPoint(wire_bytes=1240, raw_sha256="ab" * 32)
ACCEPTED = SmtpAccepted(stage="acknowledgement", reply_code=250, enhanced_status="2.0.0")
REJECTED_ACK = SmtpRejected(
    stage="acknowledgement",
    reply_code=554,
    enhanced_status="5.7.1",
    network_contacted=True,
    reason="final_reply_negative",
)
REJECTED_ENVELOPE = SmtpRejected(
    stage="envelope",
    reply_code=550,
    enhanced_status="5.1.1",
    network_contacted=True,
    reason="recipient_refused",
)
ABORTED_BEFORE_TERMINATOR = SmtpRejected(
    stage="data",
    reply_code=0,
    enhanced_status="",
    network_contacted=True,
    reason="aborted_before_terminator",
)
UNKNOWN = SmtpOutcomeUnknown(stage="acknowledgement", cause="connection_lost")
ABORTED = DispatchAborted(
    stage="integrity_validation", reason="payload_hash_mismatch", network_contacted=False
)
FILING_STARTED = SentFilingStarted(mailbox_role="sent")
FILING_SAVED = SentFilingSucceeded(destination_known=True, uid_validity=7, uid=42)
FILING_FAILED = SentFilingFailed(outcome="rejected", reason="imap_rejected")
FILING_UNKNOWN = SentFilingFailed(outcome="unknown", reason="process_lost")
EXPIRED = Expired(reason="deadline_passed")
RECOVERED_NOT_ATTEMPTED = RecoveryClassified(
    classification="not_attempted",
    stage="not_attempted",
    claim_age_ms=1_000_000,
    last_lifecycle_type="claimed",
)
RECOVERED_NOT_SUBMITTED = RecoveryClassified(
    classification="not_submitted",
    stage="interrupted",
    claim_age_ms=1_000_000,
    last_lifecycle_type="smtp_attempt_started",
)
RECOVERED_UNKNOWN = RecoveryClassified(
    classification="unknown",
    stage="acknowledgement",
    claim_age_ms=1_000_000,
    last_lifecycle_type="smtp_commit_point",
)


def quarantined(last_lifecycle_type: str) -> RollbackQuarantined:
    """A `rollback_quarantined` data object closing a stream whose last event is given."""
    return RollbackQuarantined(
        last_lifecycle_type=last_lifecycle_type,  # type: ignore[arg-type]
        detected_ms=1_700_000_000_000,
        store_clock=7,
        witness_clock=9,
    )


QUARANTINED_PREPARATION = quarantined("prepared")
QUARANTINED_APPROVAL = quarantined("approved")
QUARANTINED_CLAIM = quarantined("claimed")
QUARANTINED_ATTEMPT = quarantined("smtp_attempt_started")
QUARANTINED_COMMIT = quarantined("smtp_commit_point")
REFUSED = ConfirmRefused(reason="digest_mismatch")
APPROVED_BY_ELICITATION = approved("elicitation")
APPROVED_BY_PASSKEY = approved("passkey")
# A preparation that requires a person's approval before any claim.
NEEDS_APPROVAL = prepared(approval="elicitation")
APPROVAL_ASKED = ApprovalRequested(
    mode="elicitation", shown_sha256="a7" * 32, nonce_sha256="b8" * 32
)
APPROVAL_DECLINED = ApprovalRefused(mode="elicitation", reason="declined")
DUPLICATE = DuplicateConfirm(observed_status="accepted")
LATE = LateOutcomeObserved(outcome="accepted", stage="acknowledgement", reply_code=250)
QUEUED = DispatchQueued(connections=4, ahead=3)
RESOLVED = OperatorResolution(outcome="arrived", note="recipient confirmed by phone")
# The provider's own Sent copy of an unknown send, byte for byte the COMMIT's message.
EVIDENCE = OutcomeEvidence(
    source="sent_folder", uid_validity=7, uid=43, sha256="ab" * 32, identical=True, copies=1
)

# One valid data object per event type, in catalogue order.
SAMPLES: dict[str, EventData] = {
    "prepared": prepared(),
    "approved": APPROVED_BY_ELICITATION,
    "claimed": claimed(),
    "dispatch_aborted": ABORTED,
    "smtp_attempt_started": ATTEMPT,
    "smtp_commit_point": COMMIT,
    "smtp_accepted": ACCEPTED,
    "smtp_rejected": REJECTED_ENVELOPE,
    "smtp_outcome_unknown": UNKNOWN,
    "sent_filing_started": FILING_STARTED,
    "sent_filing_succeeded": FILING_SAVED,
    "sent_filing_failed": FILING_FAILED,
    "expired": EXPIRED,
    "recovery_classified": RECOVERED_NOT_ATTEMPTED,
    "rollback_quarantined": QUARANTINED_CLAIM,
    "approval_requested": APPROVAL_ASKED,
    "approval_refused": APPROVAL_DECLINED,
    "confirm_refused": REFUSED,
    "duplicate_confirm": DUPLICATE,
    "dispatch_queued": QUEUED,
    "late_outcome_observed": LATE,
    "operator_resolution": RESOLVED,
    "outcome_evidence": EVIDENCE,
}


def rejected(stage: str, reason: str, code: int = 0) -> SmtpRejected:
    """An `smtp_rejected` data object (no enhanced status)."""
    return SmtpRejected(
        stage=stage,  # type: ignore[arg-type]
        reply_code=code,
        enhanced_status="",
        network_contacted=stage != "not_attempted",
        reason=reason,  # type: ignore[arg-type]
    )


NOT_ATTEMPTED_REJECTION = rejected("not_attempted", "aborted_before_connect")
GRAPH_REJECTION = rejected("graph_submission", "http_4xx", 400)
BODY_WRITE_FAILED = rejected("data", "body_write_failed")
GRAPH_UNKNOWN = RecoveryClassified(
    classification="unknown",
    stage="graph_submission",
    claim_age_ms=1,
    last_lifecycle_type="smtp_commit_point",
)
# Every data variant the state-machine guards distinguish, per event type.
VARIANTS: dict[str, tuple[EventData, ...]] = {
    **{t: (data,) for t, data in SAMPLES.items()},
    "prepared": (prepared(), NEEDS_APPROVAL),
    "approved": (APPROVED_BY_ELICITATION, APPROVED_BY_PASSKEY),
    "smtp_rejected": (
        REJECTED_ENVELOPE,
        REJECTED_ACK,
        ABORTED_BEFORE_TERMINATOR,
        NOT_ATTEMPTED_REJECTION,
        GRAPH_REJECTION,
        BODY_WRITE_FAILED,
    ),
    "rollback_quarantined": (
        QUARANTINED_PREPARATION,
        QUARANTINED_APPROVAL,
        QUARANTINED_CLAIM,
        QUARANTINED_ATTEMPT,
        QUARANTINED_COMMIT,
    ),
    "recovery_classified": (
        RECOVERED_NOT_ATTEMPTED,
        RECOVERED_NOT_SUBMITTED,
        RECOVERED_UNKNOWN,
        GRAPH_UNKNOWN,
    ),
}

# A shortest lifecycle path into every state (claims ask for a Sent copy so FILING is reachable).
PATHS: dict[State, tuple[EventData, ...]] = {
    "NONE": (),
    "PREPARED": (prepared(),),
    # Only a preparation that requires an approval can be approved (elicitation here).
    "APPROVED": (NEEDS_APPROVAL, APPROVED_BY_ELICITATION),
    "CLAIMED": (prepared(), claimed(append_sent=True)),
    "ATTEMPTING": (prepared(), claimed(append_sent=True), ATTEMPT),
    "COMMITTED": (prepared(), claimed(append_sent=True), ATTEMPT, COMMIT),
    "ACCEPTED": (prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED),
    "FILING": (prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED, FILING_STARTED),
    "FILED": (
        prepared(),
        claimed(append_sent=True),
        ATTEMPT,
        COMMIT,
        ACCEPTED,
        FILING_STARTED,
        FILING_SAVED,
    ),
    "REJECTED": (prepared(), claimed(append_sent=True), ABORTED),
    "UNKNOWN": (prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, UNKNOWN),
    "EVIDENCED": (prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, UNKNOWN, EVIDENCE),
    "EXPIRED": (prepared(expires_ms=T0 + 2), EXPIRED),  # entry 2 is stored at T0 + 2
}


def actor_for(data: EventData) -> str:
    """The writer the event catalogue names for an event type."""
    if isinstance(data, Prepared | Approved | ApprovalRequested | ApprovalRefused):
        return "api:test-1"
    if isinstance(data, RecoveryClassified | RollbackQuarantined | OutcomeEvidence):
        return "recovery:worker-1"
    if isinstance(data, Expired):
        return "sweeper:worker-1"
    if isinstance(data, OperatorResolution):
        return "operator:alice"
    return f"dispatcher:{DISPATCHER}"


def build_events(
    items: Sequence[EventData],
    *,
    pid: str = PID,
    actors: Sequence[str] | None = None,
    at_ms: Sequence[int] | None = None,
) -> list[tuple[Event, bytes, str]]:
    """Chain data objects into (event, canonical bytes, hash) triples."""
    prev = genesis(pid)
    out: list[tuple[Event, bytes, str]] = []
    for n, data in enumerate(items, start=1):
        event = Event(
            pid=pid,
            seq=n,
            type=data.TYPE,  # type: ignore[arg-type]
            eid=EIDS[n],
            prev=prev,
            at_ms=T0 + n if at_ms is None else at_ms[n - 1],
            actor=actor_for(data) if actors is None else actors[n - 1],
            data=data,
        )
        e = encode_event(event)
        prev = event_hash(e)
        out.append((event, e, prev))
    return out


def chain(
    items: Sequence[EventData],
    *,
    pid: str = PID,
    srv_ms: Sequence[int] | None = None,
    key: bytes | None = None,
    actors: Sequence[str] | None = None,
) -> list[LedgerEntry]:
    """Build the stored entries a correct writer would have produced for `items`."""
    times = [T0 + n for n in range(1, len(items) + 1)] if srv_ms is None else list(srv_ms)
    entries: list[LedgerEntry] = []
    for (event, e, h), when in zip(build_events(items, pid=pid, actors=actors), times, strict=True):
        extra = {} if key is None else {"m": event_mac(key, h)}
        entries.append(
            LedgerEntry(
                pid=pid,
                id=f"0-{event.seq}",
                e=e.decode("ascii"),
                h=h,
                t=event.type,
                eid=event.eid,
                srv_ms=when,
                **extra,
            )
        )
    return entries


def payload(
    pid: str,
    *,
    created_ms: int,
    ttl_ms: int = TTL_MS,
    owner: str = OWNER,
    digest: str = DIGEST,
    approval: RequiredApproval | None = None,
) -> PreparedPayload:
    """A small private payload (synthetic content only; requiring `approval`, when given)."""
    raw = b"From: a@example.test\r\nTo: b@example.test\r\nSubject: canary\r\n\r\nbody\r\n"
    return PreparedPayload(
        pid=pid,
        owner=owner,
        transport="smtp",
        action="new",
        from_="a@example.test",
        to=("b@example.test",),
        cc=(),
        bcc=("hidden@example.test",),
        subject="canary-subject",
        text="canary-body",
        html="",
        attachments=(),
        message_id=f"<{pid}@example.test>",
        created_ms=created_ms,
        expires_ms=created_ms + ttl_ms,
        raw=raw,
        recipients=("b@example.test", "hidden@example.test"),
        warnings=(),
        digest=digest,
        approval=UNSET if approval is None else approval,
    )


def replace_e(entry: LedgerEntry, e: str, *, rehash: bool = False) -> LedgerEntry:
    """Return the entry with other `e` bytes (and, if asked, a matching `h`)."""
    h = event_hash(e.encode("latin-1")) if rehash else entry.h
    return msgspec.structs.replace(entry, e=e, h=h)


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256."""
    return hashlib.sha256(data).hexdigest()
