"""A human timeline of one send: each event, when, by whom, and what it proves."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, UnsetType, field

from ledger.audit.checks import StreamAudit
from ledger.audit.evidence import Evidence, LeaseCheck, Stamped, evidence_of, iso_ms
from ledger.lifecycle import Lifecycle, advance
from schemas.errors import MailError
from schemas.ledger import LedgerEntry, decode_event
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
    LateOutcomeObserved,
    OperatorResolution,
    OutcomeEvidence,
    Prepared,
    RecoveryClassified,
    RollbackQuarantined,
    SentFilingFailed,
    SentFilingSucceeded,
    SmtpAccepted,
    SmtpAttemptStarted,
    SmtpCommitPoint,
    SmtpOutcomeUnknown,
    SmtpRejected,
)


class TimelineLine(Struct, frozen=True, kw_only=True):
    """One event of the timeline (no private content: the ledger holds none)."""

    seq: int
    type: str
    server_time: str
    srv_ms: int
    actor: str
    meaning: str
    data: EventData | None = None  # the decoded event data (None when it does not decode)


class Timeline(Struct, frozen=True, kw_only=True):
    """The whole story of one prepared_id and the conclusion a responder may draw."""

    pid: str
    status: str
    stage: str
    recovered: bool
    conclusion: str
    investigate: str
    findings: list[str]
    events: list[TimelineLine]
    evidence: Evidence = field(default_factory=Evidence)


__all__ = ["Timeline", "TimelineLine", "conclusion", "iso_ms", "meaning", "render", "timeline"]


def meaning(data: EventData) -> str:
    """Say what one event proves, in a sentence."""
    if isinstance(data, Prepared):
        needs = (
            ""
            if isinstance(data.approval, UnsetType)
            else f", once a person approves it ({data.approval.replace('_', ' ')})"
        )
        return (
            f"preparation frozen ({data.encoded_bytes} bytes, {data.recipient_count} "
            f"recipients); claimable until {iso_ms(data.expires_ms)}{needs}"
        )
    if isinstance(data, Approved):
        client = f" through {data.client_name}" if data.client_name else ""
        return (
            f"a person approved it by {data.mode}{client}, shown text "
            f"{data.shown_sha256[:12]}; nothing sent yet"
        )
    if isinstance(data, ApprovalRequested):
        return f"a person was asked to approve it by {data.mode}; nothing sent"
    if isinstance(data, ApprovalRefused):
        return f"not approved ({data.reason.replace('_', ' ')}); nothing was consumed or sent"
    if isinstance(data, Claimed):
        sent_copy = ", Sent copy requested" if data.append_sent else ""
        return f"one-time claim: the preparation is consumed{sent_copy}; no network yet"
    if isinstance(data, DispatchAborted):
        return f"dispatch stopped before any network contact ({data.stage}, {data.reason})"
    if isinstance(data, SmtpAttemptStarted):
        return f"attempt marker: about to connect to {data.endpoint} ({data.tls_mode})"
    if isinstance(data, SmtpCommitPoint):
        return "commit point: body written, end-of-data marker about to be sent"
    if isinstance(data, SmtpAccepted):
        return f"provider accepted the message (reply {data.reply_code}; not delivery)"
    if isinstance(data, SmtpRejected):
        contact = "after" if data.network_contacted else "without"
        return f"not accepted at {data.stage} ({data.reason}, {contact} network contact)"
    if isinstance(data, SmtpOutcomeUnknown):
        return f"outcome unknown at {data.stage} ({data.cause}): may have been accepted"
    if isinstance(data, SentFilingSucceeded):
        return "Sent copy filed"
    if isinstance(data, SentFilingFailed):
        return f"Sent copy {data.outcome} ({data.reason})"
    if isinstance(data, RecoveryClassified):
        return f"recovery closed the abandoned dispatch: {data.classification}"
    if isinstance(data, RollbackQuarantined):
        return (
            "quarantined: the ledger store lost acknowledged writes (its clock "
            f"{data.store_clock} was behind {data.witness_clock}); whatever happened after "
            f"{data.last_lifecycle_type} may be missing here"
        )
    if isinstance(data, LateOutcomeObserved):
        return (
            f"late outcome: the dispatcher learned '{data.outcome}' after recovery had "
            "decided; the recorded status stands"
        )
    if isinstance(data, ConfirmRefused):
        return f"a confirm was refused ({data.reason}); nothing was consumed or sent"
    if isinstance(data, DuplicateConfirm):
        return f"confirm repeated; replayed '{data.observed_status}', nothing resent"
    if isinstance(data, DispatchQueued):
        return (
            f"waiting for one of {data.connections} SMTP connections ({data.ahead} ahead); "
            "no network yet"
        )
    if isinstance(data, OperatorResolution):
        replaced = (
            ""
            if isinstance(data.reprepared_as, UnsetType)
            else f"; re-prepared as {data.reprepared_as}"
        )
        return (
            f"a person's finding: {data.outcome.replace('_', '-')} ({data.note}){replaced}; "
            "the recorded status stands and nothing reopens"
        )
    if isinstance(data, OutcomeEvidence):
        return (
            f"evidence: the provider's own copy is in its Sent folder ("
            f"{data.where}{_more_copies(data.copies)}), "
            f"{copy_bytes(data)}: it accepted the message"
        )
    kind = data.TYPE.replace("_", " ")
    return kind[:1].upper() + kind[1:]


def copy_bytes(data: OutcomeEvidence) -> str:
    """Say how the copy's bytes compare with the submitted ones."""
    if data.identical:
        return "byte for byte the submitted message"
    if isinstance(data.sha256, UnsetType):
        return "same Message-ID, too large to compare its bytes"
    return "same Message-ID, other bytes (the provider rewrote them)"


def _more_copies(copies: int) -> str:
    return "" if copies == 1 else f"; {copies} copies found"


def conclusion(lifecycle: Lifecycle) -> str:
    """Say what the ledger proves about submission, from the lifecycle it folds to."""
    state, terminal = lifecycle.state, lifecycle.terminal
    if state == "PREPARED":
        return "never claimed: nothing was sent by this service"
    if state == "APPROVED":
        return "approved by a person, never claimed: nothing was sent by this service"
    if state == "EXPIRED":
        return "expired unclaimed: nothing was sent by this service"
    if state == "CLAIMED":
        waiting = ", waiting for an SMTP connection" if lifecycle.queued else ""
        return f"claimed{waiting}, attempt marker absent: nothing has been sent (so far)"
    if state == "ATTEMPTING":
        return "attempt marker present, commit point absent: not submitted (so far)"
    if state == "COMMITTED":
        return "commit point present, no outcome yet: the message may have been submitted"
    if state == "EVIDENCED" and lifecycle.evidence is not None:
        return (
            "the outcome was lost, but the provider's own copy in its Sent folder "
            f"({copy_bytes(lifecycle.evidence)}) proves it accepted the message (acceptance is "
            "not delivery)"
        )
    if isinstance(terminal, RollbackQuarantined):
        return (
            "the ledger store went back in time: this send may have been claimed and sent in "
            "the history it forgot; it will never be sent by this service again. Check Sent "
            "and the recipients, never resend automatically"
        )
    if isinstance(terminal, RecoveryClassified):
        if terminal.classification == "not_attempted":
            return "attempt marker absent: the message was provably never sent"
        if terminal.classification == "not_submitted":
            return (
                "attempt marker present, commit point absent: the message was provably "
                "not submitted"
            )
        return (
            "commit point present, outcome lost: the message may have been accepted; check "
            "Sent and the recipients, never resend automatically"
        )
    if isinstance(terminal, DispatchAborted):
        return "stopped before any connection: the message was provably never sent"
    if isinstance(terminal, SmtpRejected):
        if terminal.stage in ("acknowledgement", "graph_submission"):
            return "the provider explicitly refused the submitted message: not accepted"
        return "the end-of-data marker was never sent: the message was provably not submitted"
    if isinstance(terminal, SmtpOutcomeUnknown):
        return (
            "end-of-data sent, reply lost: the message may have been accepted; never resend "
            "automatically"
        )
    return "the provider accepted the message (acceptance is not delivery)"


class _Read(Struct, frozen=True, kw_only=True):
    """A stream as read for a person: its lines, decoded events, and the lifecycle they fold to."""

    lines: list[TimelineLine]
    stamped: list[Stamped]
    lifecycle: Lifecycle | None  # None when the events do not decode or fold


def _read(entries: Sequence[LedgerEntry]) -> _Read:
    lines: list[TimelineLine] = []
    stamped: list[Stamped] = []
    lifecycle: Lifecycle | None = Lifecycle()
    for entry in entries:
        try:
            event = decode_event(entry.e)
        except MailError:
            lines.append(
                TimelineLine(
                    seq=entry.seq,
                    type=entry.t,
                    server_time=iso_ms(max(entry.srv_ms, 0)),
                    srv_ms=entry.srv_ms,
                    actor="?",
                    meaning="unreadable event (integrity finding)",
                )
            )
            lifecycle = None
            continue
        if lifecycle is not None:
            try:
                lifecycle = advance(lifecycle, event, entry.srv_ms)
            except MailError:
                lifecycle = None
        stamped.append(Stamped(event, entry.srv_ms))
        lines.append(
            TimelineLine(
                seq=event.seq,
                type=event.type,
                server_time=iso_ms(entry.srv_ms),
                srv_ms=entry.srv_ms,
                actor=event.actor,
                meaning=meaning(event.data),
                data=event.data,
            )
        )
    return _Read(lines=lines, stamped=stamped, lifecycle=lifecycle)


def lifecycle_of(entries: Sequence[LedgerEntry]) -> Lifecycle | None:
    """Fold a stream's events as the timeline does (None when they do not decode or fold)."""
    return _read(entries).lifecycle


def timeline(
    audit: StreamAudit, entries: Sequence[LedgerEntry], lease: LeaseCheck | None = None
) -> Timeline:
    """Build the timeline and evidence of one stream (events that do not decode are shown as
    such); `lease` is what the store said about the claiming process of an open send."""
    read = _read(entries)
    sound = read.lifecycle is not None and audit.status != "corrupt"
    lifecycle = read.lifecycle if sound else None
    return Timeline(
        pid=audit.pid,
        status=audit.status,
        stage=audit.stage,
        recovered=audit.recovered,
        conclusion=(
            conclusion(lifecycle)
            if lifecycle is not None
            else "the stream failed verification: no conclusion can be drawn from it"
        ),
        investigate=audit.investigate,
        findings=[f"seq {f.seq}: {f.kind} ({f.detail})" for f in audit.findings],
        events=read.lines,
        evidence=evidence_of(read.stamped, lifecycle, lease),
    )


def render(view: Timeline) -> str:
    """Render a timeline and its evidence as text for a person."""
    stage = f" / {view.stage}" if view.stage else ""
    recovered = " (written by recovery)" if view.recovered else ""
    out = [f"prepared_id {view.pid}", f"status: {view.status}{stage}{recovered}"]
    out.append("")
    for line in view.events:
        out.append(f"  {line.seq:>3}  {line.server_time}  {line.type:<22} {line.actor}")
        out.append(f"       {line.meaning}")
    out.append("")
    out.append(f"conclusion: {view.conclusion}")
    if view.investigate:
        out.append(f"investigate: {view.investigate}")
    for finding in view.findings:
        out.append(f"finding: {finding}")
    facts = evidence_lines(view.evidence)
    if facts:
        out += ["", "evidence:"]
        out += [f"  {label + ':' if label else '':<18} {text}" for label, text in facts]
    return "\n".join(out)


def evidence_lines(evidence: Evidence) -> list[tuple[str, str]]:
    """The evidence as (label, text) pairs, in the order a responder uses them."""
    facts: list[tuple[str, str]] = []
    if evidence.message_id:
        facts.append(("Message-ID", evidence.message_id))
    if evidence.endpoint:
        facts.append(
            ("endpoint", f"{evidence.endpoint} ({evidence.tls_mode}, {evidence.transport})")
        )
    if evidence.may_have_left_at:
        facts.append(("may have left at", f"{evidence.may_have_left_at} (the commit point)"))
    if evidence.outcome:
        facts.append(("outcome", evidence.outcome))
    if evidence.raw_sha256:
        facts.append(("raw_sha256", evidence.raw_sha256))
        facts.append(("", evidence.raw_sha256_use))
        facts.append(("wire_bytes", f"{evidence.wire_bytes} (bytes written in DATA, dot-stuffed)"))
    copy = evidence.sent_copy
    if copy is not None:
        compared = (
            "identical to raw_sha256"
            if copy.identical
            else "same Message-ID, other bytes"
            + (f" (SHA-256 {copy.sha256})" if copy.sha256 else "")
        )
        facts.append((
            "Sent copy",
            f"found by {copy.by} at {copy.server_time}: {copy.where}, {compared}",
        ))  # fmt: skip
    if evidence.lease is not None:
        facts.append(("lease", evidence.lease.said))
    for resolution in evidence.resolutions:
        replaced = (
            f", re-prepared as {resolution.reprepared_as}" if resolution.reprepared_as else ""
        )
        facts.append((
            "resolution",
            f"{resolution.outcome} by {resolution.by} at {resolution.server_time}{replaced}: "
            f"{resolution.note}",
        ))  # fmt: skip
    return facts
