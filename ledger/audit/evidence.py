"""The evidence a responder needs about one send, drawn from its events (pure; no I/O).

Message-ID, endpoint, when the message may have left, the server's answer, the SHA-256 of the
submitted bytes, the claiming process's lease while the send is open, and what people have
recorded since. None of it is mail content: the ledger holds none.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Literal, NamedTuple

from msgspec import Struct, UnsetType, field

from ledger.lifecycle import Lifecycle, grace_for, recorded_grace
from schemas.ledger import Event
from schemas.ledger_events import (
    DispatchAborted,
    EventData,
    OperatorResolution,
    OutcomeEvidence,
    Prepared,
    RecoveryClassified,
    RollbackQuarantined,
    SmtpAccepted,
    SmtpAttemptStarted,
    SmtpCommitPoint,
    SmtpOutcomeUnknown,
    SmtpRejected,
)

OPEN_STATES: Final = frozenset({"CLAIMED", "ATTEMPTING", "COMMITTED", "FILING"})
RAW_SHA256_USE: Final = (
    "the SHA-256 of the exact message bytes submitted: a copy the SMTP server or provider "
    "stored as received (before it added its own trace headers) has the same SHA-256, which "
    "proves that copy is this send"
)


def iso_ms(ms: int) -> str:
    """Render epoch milliseconds as UTC with milliseconds, e.g. 2026-01-02T03:04:05.678Z."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class Stamped(NamedTuple):
    """One decoded event and the Redis time it was stored at."""

    event: Event
    srv_ms: int


class LeaseCheck(Struct, frozen=True, kw_only=True):
    """What the store said about a lease, and the configured grace and time to judge it by."""

    alive: bool  # the lease key exists
    expires_in_ms: int | None  # its remaining time while alive (None: no expiry, or gone)
    configured_grace_ms: int
    now_ms: int


class Lease(Struct, frozen=True, kw_only=True):
    """The claiming process's lease for a send still open, and when recovery may decide it."""

    dispatcher_id: str
    alive: bool
    expires_in_ms: int | None = None
    open_since_ms: int  # the claim, or the Sent filing's start for FILING
    grace_ms: int
    grace_source: Literal["claim", "configured"]
    decidable_ms: int
    decidable_at: str
    decidable_now: bool
    said: str


class Resolution(Struct, frozen=True, kw_only=True):
    """One operator's recorded finding: what, in their words, by whom and when."""

    outcome: str
    note: str
    reprepared_as: str = ""
    by: str
    srv_ms: int
    server_time: str


class SentCopyFound(Struct, frozen=True, kw_only=True):
    """The provider's own Sent copy that proved an unknown send accepted, as recorded."""

    where: str  # UIDVALIDITY and UID, or the Microsoft Graph message ID, in words
    sha256: str  # of the copy's bytes ("" when it was too large to read whole)
    identical: bool  # its SHA-256 is the commit point's raw_sha256
    copies: int
    by: str  # recovery or the operator who asked
    srv_ms: int
    server_time: str


class Evidence(Struct, frozen=True, kw_only=True):
    """The facts about one send that outside checks (Sent, provider, recipient) start from."""

    message_id: str = ""
    transport: str = ""
    endpoint: str = ""
    tls_mode: str = ""
    commit_srv_ms: int | None = None
    may_have_left_at: str = ""  # the commit point: the end-of-data marker was about to go
    wire_bytes: int | None = None
    raw_sha256: str = ""
    raw_sha256_use: str = ""
    outcome: str = ""  # the server's answer, the lost reply's cause, or recovery's verdict
    reply_code: int | None = None
    enhanced_status: str = ""
    cause: str = ""
    classification: str = ""
    lease: Lease | None = None
    resolutions: list[Resolution] = field(default_factory=list)
    sent_copy: SentCopyFound | None = None


def evidence_of(
    stamped: Sequence[Stamped], lifecycle: Lifecycle | None, lease: LeaseCheck | None = None
) -> Evidence:
    """Collect the evidence from a stream's decoded events (and, for an open send, its lease)."""
    message_id = ""
    attempt: SmtpAttemptStarted | None = None
    commit: Stamped | None = None
    resolutions: list[Resolution] = []
    sent_copy: SentCopyFound | None = None
    for item in stamped:
        data = item.event.data
        if isinstance(data, Prepared):
            message_id = data.message_id
        elif isinstance(data, SmtpAttemptStarted):
            attempt = data
        elif isinstance(data, SmtpCommitPoint):
            commit = item
        elif isinstance(data, OperatorResolution):
            resolutions.append(_resolution(item.event, data, item.srv_ms))
        elif isinstance(data, OutcomeEvidence):
            sent_copy = _sent_copy(item.event, data, item.srv_ms)
    terminal = None if lifecycle is None else lifecycle.terminal
    answer = _Answer() if terminal is None else _answer(terminal)
    point = None if commit is None else commit.event.data
    return Evidence(
        message_id=message_id,
        transport="" if attempt is None else attempt.transport,
        endpoint="" if attempt is None else attempt.endpoint,
        tls_mode="" if attempt is None else attempt.tls_mode,
        commit_srv_ms=None if commit is None else commit.srv_ms,
        may_have_left_at="" if commit is None else iso_ms(commit.srv_ms),
        wire_bytes=point.wire_bytes if isinstance(point, SmtpCommitPoint) else None,
        raw_sha256=point.raw_sha256 if isinstance(point, SmtpCommitPoint) else "",
        raw_sha256_use="" if commit is None else RAW_SHA256_USE,
        outcome=answer.said,
        reply_code=answer.reply_code,
        enhanced_status=answer.enhanced_status,
        cause=answer.cause,
        classification=answer.classification,
        lease=None if lifecycle is None or lease is None else lease_of(lifecycle, lease),
        resolutions=resolutions,
        sent_copy=sent_copy,
    )


def _sent_copy(event: Event, data: OutcomeEvidence, srv_ms: int) -> SentCopyFound:
    return SentCopyFound(
        where=data.where,
        sha256="" if isinstance(data.sha256, UnsetType) else data.sha256,
        identical=data.identical,
        copies=data.copies,
        by=event.actor,
        srv_ms=srv_ms,
        server_time=iso_ms(srv_ms),
    )


def lease_holder(lifecycle: Lifecycle) -> str | None:
    """The dispatcher whose lease keeps recovery away from an open send (None when settled)."""
    if lifecycle.state not in OPEN_STATES or lifecycle.claimed is None:
        return None
    return lifecycle.claimed.dispatcher_id


def lease_of(lifecycle: Lifecycle, check: LeaseCheck) -> Lease | None:
    """Say whether the claiming process lives and when recovery can decide (None if settled)."""
    holder = lease_holder(lifecycle)
    since = lifecycle.filing_srv_ms if lifecycle.state == "FILING" else lifecycle.claimed_srv_ms
    if holder is None or since is None or lifecycle.claimed is None:
        return None
    # The grace recovery and the store's script apply: the longer of the one recorded at the
    # claim and the configured one.
    grace = grace_for(lifecycle, check.configured_grace_ms)
    source: Literal["claim", "configured"] = (
        "claim" if recorded_grace(lifecycle) == grace else "configured"
    )
    decidable = since + grace
    now = decidable <= check.now_ms
    return Lease(
        dispatcher_id=holder,
        alive=check.alive,
        expires_in_ms=check.expires_in_ms if check.alive else None,
        open_since_ms=since,
        grace_ms=grace,
        grace_source=source,
        decidable_ms=decidable,
        decidable_at=iso_ms(decidable),
        decidable_now=now,
        said=_lease_words(check, decidable, now),
    )


def _lease_words(check: LeaseCheck, decidable_ms: int, now: bool) -> str:
    if check.alive:
        left = check.expires_in_ms
        expiry = "" if left is None else f" (expires in {left / 1000:.1f} s unless refreshed)"
        if now:
            return (
                f"alive{expiry}, past the recovery grace: the process is running but stuck; "
                "recovery leaves a live process alone, so look at that server"
            )
        return (
            f"alive{expiry}: the claiming process is running; if it stops, recovery can "
            f"decide at {iso_ms(decidable_ms)}"
        )
    if now:
        return "expired; recovery can decide now: run `angelos ledger recover`"
    return f"expired; recovery can decide at {iso_ms(decidable_ms)}"


def _resolution(event: Event, data: OperatorResolution, srv_ms: int) -> Resolution:
    return Resolution(
        outcome=data.outcome.replace("_", "-"),
        note=data.note,
        reprepared_as="" if isinstance(data.reprepared_as, UnsetType) else data.reprepared_as,
        by=event.actor,
        srv_ms=srv_ms,
        server_time=iso_ms(srv_ms),
    )


class _Answer(Struct, frozen=True, kw_only=True):
    """The answer recorded at the end of a dispatch, in words and as fields."""

    said: str = ""
    reply_code: int | None = None
    enhanced_status: str = ""
    cause: str = ""
    classification: str = ""


def _answer(data: EventData) -> _Answer:
    if isinstance(data, SmtpAccepted):
        said = f"accepted: reply {_reply(data.reply_code, data.enhanced_status)}"
        return _Answer(said=said, reply_code=data.reply_code, enhanced_status=data.enhanced_status)
    if isinstance(data, SmtpRejected):
        reply = _reply(data.reply_code, data.enhanced_status) if data.reply_code else "none"
        said = f"not accepted at {data.stage}: reply {reply} ({data.reason})"
        return _Answer(said=said, reply_code=data.reply_code, enhanced_status=data.enhanced_status)
    if isinstance(data, SmtpOutcomeUnknown):
        return _Answer(said=f"reply lost at {data.stage}: {data.cause}", cause=data.cause)
    if isinstance(data, RecoveryClassified):
        said = f"recovery classified it {data.classification} ({data.stage})"
        return _Answer(said=said, classification=data.classification)
    if isinstance(data, DispatchAborted):
        return _Answer(said=f"stopped before any network contact: {data.reason}")
    if isinstance(data, RollbackQuarantined):
        return _Answer(said="quarantined after the ledger store went back in time")
    return _Answer()


def _reply(code: int, enhanced: str) -> str:
    return f"{code} {enhanced}" if enhanced else str(code)
