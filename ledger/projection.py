"""The pure projection of one ledger stream to the public `send_status` answer."""

from __future__ import annotations

import hmac
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Literal, NamedTuple

import msgspec
from msgspec import UnsetType

from ledger.chain import event_hash, genesis, verified_events
from ledger.lifecycle import UNCLAIMED, Lifecycle, fold
from schemas.ledger import (
    PUBLIC_STAGES,
    UNAVAILABLE,
    EventRejected,
    LedgerCorrupt,
    LedgerEntry,
    SendStatusResult,
    decode_event,
)
from schemas.ledger_events import (
    MAX_ENTRIES,
    MAX_MESSAGE_ID_BYTES,
    DispatchAborted,
    PublicStatus,
    RecoveryClassified,
    RollbackQuarantined,
    SentFiling,
    SentFilingFailed,
    SentFilingSucceeded,
    SmtpAccepted,
    SmtpOutcomeUnknown,
    SmtpRejected,
)

_OWNER = re.compile(r"[0-9a-f]{64}", re.ASCII)
_MAX_EXPIRES_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_MAX_ANSWER_BYTES: Final = 8192
_SENDING_STATES: Final = frozenset({"CLAIMED", "ATTEMPTING", "COMMITTED"})
# EVIDENCED: the reply was lost, but the provider's own Sent copy proves it accepted the message.
_ACCEPTED_STATES: Final = frozenset({"ACCEPTED", "FILING", "FILED", "EVIDENCED"})


def integrity_alarm(entries: Sequence[LedgerEntry]) -> str | None:
    """Say why a non-empty stream has no valid start (entry 1), or None when its start is sound."""
    if not entries:
        return None
    first = entries[0]
    try:
        event = decode_event(first.e)
    except EventRejected:
        return "entry 1 is not a canonical event"
    if first.seq != 1 or event.seq != 1 or event.type != "prepared" or first.t != "prepared":
        return "entry 1 is not the prepared event"
    if event.pid != first.pid:
        return "entry 1 belongs to another pid"
    if event.prev != genesis(first.pid):
        return "entry 1 does not start from genesis"
    if event_hash(first.e.encode("latin-1", "replace")) != first.h:
        return "entry 1 does not match its hash"
    return None


def project(
    entries: Sequence[LedgerEntry],
    owner: str | None,
    now_ms: int,
    *,
    auditor: bool = False,
) -> SendStatusResult:
    """Fold a stream read at server time `now_ms` into the owner's public status.

    Unknown, foreign or unstartable streams answer `unavailable`; a stream that starts soundly
    but then breaks its chain or the state machine raises LedgerCorrupt (never a guess).
    """
    if not entries or integrity_alarm(entries) is not None:
        return UNAVAILABLE
    if not auditor and not _owns(entries[0], owner):
        return UNAVAILABLE
    if len(entries) > MAX_ENTRIES:
        raise LedgerCorrupt("the send ledger stream is longer than its limit")
    events = verified_events(entries[0].pid, entries)
    lifecycle = fold(events, [entry.srv_ms for entry in entries])
    answer = public_status(lifecycle, now_ms)
    if len(msgspec.json.encode(answer)) > _MAX_ANSWER_BYTES:
        raise LedgerCorrupt("the send status answer exceeds its size limit")
    return answer


def _owns(first: LedgerEntry, owner: str | None) -> bool:
    if owner is None or _OWNER.fullmatch(owner) is None:
        return False
    stored = decode_event(first.e).data
    return hmac.compare_digest(getattr(stored, "owner", ""), owner)


class PublicState(NamedTuple):
    """What public_status says of a lifecycle, before it is dressed as an answer."""

    status: PublicStatus | Literal["unavailable"]
    stage: str | None  # a public stage, or None
    recovered: bool


_UNAVAILABLE_STATE: Final = PublicState("unavailable", None, False)


def public_state(lifecycle: Lifecycle, now_ms: int) -> PublicState:
    """Map a folded lifecycle to its public status, stage and recovery.

    The audit reads only these; public_status builds the whole answer from them.
    """
    prepared = lifecycle.prepared
    if prepared is None:
        return _UNAVAILABLE_STATE
    if len(prepared.message_id.encode()) > MAX_MESSAGE_ID_BYTES:
        raise LedgerCorrupt("the stored Message-ID is too long")
    if not 0 < prepared.expires_ms <= _MAX_EXPIRES_MS:
        raise LedgerCorrupt("the stored expiry is out of range")
    state = lifecycle.state
    status: PublicStatus
    if state in UNCLAIMED:
        status = "prepared" if now_ms < prepared.expires_ms else "expired"
    elif state == "EXPIRED":
        status = "expired"
    elif state in _SENDING_STATES:
        status = "sending"
    elif state in _ACCEPTED_STATES:
        status = "accepted"
    elif state == "REJECTED":
        status = "rejected"
    elif state == "UNKNOWN":
        status = "unknown"
    else:
        raise LedgerCorrupt("the send ledger stream has no public status")
    stage = _stage(lifecycle) if status in ("accepted", "rejected", "unknown") else None
    recovered = isinstance(lifecycle.terminal, RecoveryClassified)
    return PublicState(status, stage if stage in PUBLIC_STAGES else None, recovered)


def public_status(lifecycle: Lifecycle, now_ms: int) -> SendStatusResult:
    """Map a folded lifecycle to its public status (docs/ledger.md) plus `sent_filing` etc."""
    prepared = lifecycle.prepared
    if prepared is None:
        return UNAVAILABLE
    answer = public_state(lifecycle, now_ms)
    status = answer.status
    queued = lifecycle.state == "CLAIMED" and lifecycle.queued
    evidence = lifecycle.evidence
    return SendStatusResult(
        status=status,
        message_id=prepared.message_id,
        expires_at=rfc3339_seconds(prepared.expires_ms),
        stage=msgspec.UNSET if answer.stage is None else answer.stage,
        sent_filing=_sent_filing(lifecycle, status),
        recovered=True if answer.recovered else msgspec.UNSET,
        queued=True if queued else msgspec.UNSET,
        resolution=(lifecycle.resolutions[-1].outcome if lifecycle.resolutions else msgspec.UNSET),
        evidence=msgspec.UNSET if evidence is None else "sent_copy",
        evidence_identical=msgspec.UNSET if evidence is None else evidence.identical,
        approval=_approval(lifecycle),
    )


def _approval(lifecycle: Lifecycle) -> Literal["required", "elicitation", "passkey"] | UnsetType:
    prepared = lifecycle.prepared
    if prepared is None or isinstance(prepared.approval, UnsetType):
        return msgspec.UNSET
    return "required" if lifecycle.approved is None else lifecycle.approved.mode


def _stage(lifecycle: Lifecycle) -> str | None:
    terminal = lifecycle.terminal
    if isinstance(terminal, RollbackQuarantined):
        return "store_rollback"
    if isinstance(
        terminal,
        DispatchAborted | SmtpRejected | SmtpAccepted | SmtpOutcomeUnknown | RecoveryClassified,
    ):
        return terminal.stage
    return None


def _sent_filing(lifecycle: Lifecycle, status: str) -> SentFiling | msgspec.UnsetType:
    claimed = lifecycle.claimed
    if claimed is None or not claimed.append_sent:
        return msgspec.UNSET
    if status == "sending":
        return "pending"
    if status != "accepted" or lifecycle.state == "EVIDENCED":
        return "skipped"  # not accepted, or accepted only by evidence: angelos filed nothing
    result = lifecycle.filing_result
    if isinstance(result, SentFilingSucceeded):
        return "saved"
    if isinstance(result, SentFilingFailed):
        return "unknown" if result.outcome == "unknown" else "failed"
    return "pending"


def entries_as_of(entries: Sequence[LedgerEntry], as_of_ms: int) -> list[LedgerEntry]:
    """Keep the entries stored at or before `as_of_ms` (auditor replay of a past answer)."""
    return [entry for entry in entries if entry.srv_ms <= as_of_ms]


def rfc3339_seconds(ms: int) -> str:
    """Render epoch milliseconds as whole-second UTC RFC 3339 (floor), e.g. 2026-01-02T03:04:05Z."""
    moment = datetime.fromtimestamp(ms // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
