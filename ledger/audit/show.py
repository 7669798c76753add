"""A human timeline of one send: each event, when, by whom, and what it proves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from msgspec import Struct

from ledger.audit.checks import StreamAudit
from ledger.lifecycle import Lifecycle, advance
from schemas.errors import MailError
from schemas.ledger import Event, LedgerEntry, decode_event
from schemas.ledger_events import (
    Claimed,
    ConfirmRefused,
    DispatchAborted,
    DispatchQueued,
    DuplicateConfirm,
    EventData,
    LateOutcomeObserved,
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


def iso_ms(ms: int) -> str:
    """Render epoch milliseconds as UTC with milliseconds, e.g. 2026-01-02T03:04:05.678Z."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def meaning(data: EventData) -> str:
    """Say what one event proves, in a sentence."""
    if isinstance(data, Prepared):
        return (
            f"preparation frozen ({data.encoded_bytes} bytes, {data.recipient_count} "
            f"recipients); claimable until {iso_ms(data.expires_ms)}"
        )
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
    kind = data.TYPE.replace("_", " ")
    return kind[:1].upper() + kind[1:]


def conclusion(lifecycle: Lifecycle) -> str:
    """Say what the ledger proves about submission, from the lifecycle it folds to."""
    state, terminal = lifecycle.state, lifecycle.terminal
    if state == "PREPARED":
        return "never claimed: nothing was sent by this service"
    if state == "EXPIRED":
        return "expired unclaimed: nothing was sent by this service"
    if state == "CLAIMED":
        waiting = ", waiting for an SMTP connection" if lifecycle.queued else ""
        return f"claimed{waiting}, attempt marker absent: nothing has been sent (so far)"
    if state == "ATTEMPTING":
        return "attempt marker present, commit point absent: not submitted (so far)"
    if state == "COMMITTED":
        return "commit point present, no outcome yet: the message may have been submitted"
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


def timeline(audit: StreamAudit, entries: Sequence[LedgerEntry]) -> Timeline:
    """Build the timeline of one stream (events that do not decode are shown as such)."""
    lines: list[TimelineLine] = []
    lifecycle = Lifecycle()
    folded = True
    for entry in entries:
        event: Event | None
        try:
            event = decode_event(entry.e)
        except MailError:
            event = None
        if event is None:
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
            folded = False
            continue
        if folded:
            try:
                lifecycle = advance(lifecycle, event, entry.srv_ms)
            except MailError:
                folded = False
        lines.append(
            TimelineLine(
                seq=event.seq,
                type=event.type,
                server_time=iso_ms(entry.srv_ms),
                srv_ms=entry.srv_ms,
                actor=event.actor,
                meaning=meaning(event.data),
            )
        )
    said = (
        conclusion(lifecycle)
        if folded and audit.status != "corrupt"
        else "the stream failed verification: no conclusion can be drawn from it"
    )
    return Timeline(
        pid=audit.pid,
        status=audit.status,
        stage=audit.stage,
        recovered=audit.recovered,
        conclusion=said,
        investigate=audit.investigate,
        findings=[f"seq {f.seq}: {f.kind} ({f.detail})" for f in audit.findings],
        events=lines,
    )


def render(view: Timeline) -> str:
    """Render a timeline as text for a person."""
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
    return "\n".join(out)
