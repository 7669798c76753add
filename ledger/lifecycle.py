"""The lifecycle state machine of one send as data and pure functions.

`TRANSITIONS` is the single source of truth: the fold below uses it, and ledger/store/scripts.py
renders the same table into the Lua append script, so Python and Redis cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, get_args

import msgspec
from msgspec import Struct, UnsetType

from schemas.ledger import Event, InvalidTransition
from schemas.ledger_events import (
    ANNOTATION_TYPES,
    DISPATCH_TERMINAL_TYPES,
    Approved,
    Claimed,
    EventData,
    OperatorResolution,
    OutcomeEvidence,
    Prepared,
    SentFilingFailed,
    SentFilingSucceeded,
    SmtpAttemptStarted,
    SmtpCommitPoint,
)
from schemas.send_policy import accepts

State = Literal[
    "NONE",
    "PREPARED",
    "APPROVED",
    "CLAIMED",
    "ATTEMPTING",
    "COMMITTED",
    "ACCEPTED",
    "FILING",
    "FILED",
    "REJECTED",
    "UNKNOWN",
    "EVIDENCED",
    "EXPIRED",
]
STATES: Final[tuple[State, ...]] = get_args(State)
TERMINAL_STATES: Final = frozenset({"REJECTED", "UNKNOWN", "EVIDENCED", "EXPIRED", "FILED"})
# Conditions that the data alone cannot decide: the deadline needs a clock, `append_sent` needs
# the claim, recovery needs an actor of kind `recovery:` (plus, in Redis, lease and grace), and
# a quarantine needs that actor too (plus, in Redis, a recorded rollback halt).
# An operator's resolution needs an actor of kind `operator:`; evidence that an unknown send was
# accepted needs one of kind `recovery:` or `operator:`. An approval needs a preparation that
# requires one, of the kind given; a claim straight from PREPARED needs one that requires none.
Need = Literal[
    "",
    "deadline",
    "append_sent",
    "recovery",
    "halted",
    "operator",
    "evidence",
    "approval",
    "unapproved",
]

Guard = tuple[tuple[str, tuple[str, ...]], ...]  # every (field, allowed values) must hold


class Rule(Struct, frozen=True):
    """One allowed transition: the target state, data guards (any one may match), a need."""

    to: State
    when: tuple[Guard, ...] = ()
    need: Need = ""


def _quarantine(last_lifecycle_type: str) -> Rule:
    return Rule(
        "UNKNOWN", when=((("last_lifecycle_type", (last_lifecycle_type,)),),), need="halted"
    )


_PRE_TERMINATOR = ("not_attempted", "connection", "authentication", "envelope", "data")

TRANSITIONS: Final[dict[tuple[State, str], Rule]] = {
    ("NONE", "prepared"): Rule("PREPARED"),
    ("PREPARED", "claimed"): Rule("CLAIMED", need="unapproved"),
    ("PREPARED", "expired"): Rule("EXPIRED", need="deadline"),
    # Human approval, when the preparation requires it: frozen at prepare, so neither a restart
    # under another setting nor a race can claim without it.
    ("PREPARED", "approved"): Rule("APPROVED", need="approval"),
    ("APPROVED", "claimed"): Rule("CLAIMED"),
    ("APPROVED", "expired"): Rule("EXPIRED", need="deadline"),
    ("CLAIMED", "dispatch_aborted"): Rule("REJECTED"),
    ("CLAIMED", "smtp_attempt_started"): Rule("ATTEMPTING"),
    ("CLAIMED", "recovery_classified"): Rule(
        "REJECTED",
        when=((("classification", ("not_attempted",)), ("stage", ("not_attempted",))),),
        need="recovery",
    ),
    # Before the commit point no end-of-data marker (nor Graph POST) can have left (I4), so a
    # rejection here never carries the acknowledgement or graph_submission stage.
    ("ATTEMPTING", "smtp_rejected"): Rule("REJECTED", when=((("stage", _PRE_TERMINATOR),),)),
    ("ATTEMPTING", "smtp_commit_point"): Rule("COMMITTED"),
    ("ATTEMPTING", "recovery_classified"): Rule(
        "REJECTED",
        when=((("classification", ("not_submitted",)), ("stage", ("interrupted",))),),
        need="recovery",
    ),
    ("COMMITTED", "smtp_accepted"): Rule("ACCEPTED"),
    ("COMMITTED", "smtp_rejected"): Rule(
        "REJECTED",
        when=(
            (("stage", ("acknowledgement", "graph_submission")),),
            (("stage", ("data",)), ("reason", ("aborted_before_terminator",))),
        ),
    ),
    ("COMMITTED", "smtp_outcome_unknown"): Rule("UNKNOWN"),
    ("COMMITTED", "recovery_classified"): Rule(
        "UNKNOWN",
        when=(
            (
                ("classification", ("unknown",)),
                ("stage", ("acknowledgement", "graph_submission")),
            ),
        ),
        need="recovery",
    ),
    ("ACCEPTED", "sent_filing_started"): Rule("FILING", need="append_sent"),
    ("FILING", "sent_filing_succeeded"): Rule("FILED"),
    ("FILING", "sent_filing_failed"): Rule("FILED"),
    # After a rollback an open send's recorded state may be older than the truth: it ends as
    # unknown, is never claimed again and is never classified as "provably not sent".
    ("PREPARED", "rollback_quarantined"): _quarantine("prepared"),
    ("APPROVED", "rollback_quarantined"): _quarantine("approved"),
    ("CLAIMED", "rollback_quarantined"): _quarantine("claimed"),
    ("ATTEMPTING", "rollback_quarantined"): _quarantine("smtp_attempt_started"),
    ("COMMITTED", "rollback_quarantined"): _quarantine("smtp_commit_point"),
    # The provider's own copy of an unknown send, found in its Sent folder by the exact
    # Message-ID, proves it accepted the message. EVIDENCED is final: nothing from it claims,
    # connects or files, so evidence can never lead to a second send. Absence proves nothing
    # and is never written.
    ("UNKNOWN", "outcome_evidence"): Rule("EVIDENCED", need="evidence"),
    # A person's finding about a settled send: the state stays, so nothing reopens or becomes
    # claimable. Open sends (and an open Sent filing) are recovery's to settle first.
    **{
        (settled, "operator_resolution"): Rule(settled, need="operator")
        for settled in ("ACCEPTED", "FILED", "REJECTED", "UNKNOWN", "EVIDENCED", "EXPIRED")
    },
}
# The states a claim may start from: an unclaimed preparation, approved or not.
UNCLAIMED: Final = frozenset(s for (s, kind) in TRANSITIONS if kind == "claimed")
# Open: unclaimed, or a dispatch or Sent filing recovery has yet to settle.
OPEN: Final = UNCLAIMED | {"CLAIMED", "ATTEMPTING", "COMMITTED", "FILING"}
# What a detected rollback may end: every open state before the provider's answer.
QUARANTINABLE: Final = frozenset(s for (s, kind) in TRANSITIONS if kind == "rollback_quarantined")
# The states whose sends await a search for evidence (recovery's work list in the store).
AWAITS_EVIDENCE: Final = frozenset(s for (s, kind) in TRANSITIONS if kind == "outcome_evidence")
# While a rollback halt is recorded the store refuses these events: each would either start a
# send (a preparation, a claim, a network step) or conclude from a history that may be
# incomplete that something was not sent (recovery's classifications, an expiry).
HALT_BLOCKED: Final = frozenset(
    {
        "prepared",
        "approved",
        "claimed",
        "smtp_attempt_started",
        "smtp_commit_point",
        "recovery_classified",
        "expired",
    }
)


class Lifecycle(Struct, frozen=True, kw_only=True):
    """What a fold of one stream knows: its state and the events later decisions depend on."""

    state: State = "NONE"
    prepared: Prepared | None = None
    approved: Approved | None = None
    claimed: Claimed | None = None
    claimed_srv_ms: int | None = None
    attempt: SmtpAttemptStarted | None = None
    commit: SmtpCommitPoint | None = None
    terminal: EventData | None = None
    terminal_srv_ms: int | None = None
    filing_srv_ms: int | None = None
    filing_result: SentFilingSucceeded | SentFilingFailed | None = None
    last_lifecycle_type: str = ""
    lifecycle_events: int = 0
    annotations: int = 0
    queued: bool = False  # a dispatch_queued annotation was written (it waits while CLAIMED)
    resolutions: tuple[OperatorResolution, ...] = ()  # a person's findings, oldest first
    evidence: OutcomeEvidence | None = None  # the provider's copy that settled an unknown send


def recorded_grace(lifecycle: Lifecycle) -> int | None:
    """The recovery grace the claim recorded as in force, or None (no claim, or an older one)."""
    claimed = lifecycle.claimed
    if claimed is None or isinstance(claimed.recovery_grace_ms, UnsetType):
        return None
    return claimed.recovery_grace_ms


def grace_for(lifecycle: Lifecycle, grace_ms: int) -> int:
    """The grace recovery waits for this send: its own setting, or the longer one in force at
    the claim (the store's append script applies the same rule)."""
    recorded = recorded_grace(lifecycle)
    return grace_ms if recorded is None else max(grace_ms, recorded)


def rule_for(state: State, event_type: str) -> Rule | None:
    """Return the transition rule for `event_type` in `state`, or None when none exists."""
    return TRANSITIONS.get((state, event_type))


def guards_hold(rule: Rule, data: EventData) -> bool:
    """Tell whether the event data satisfies one of the rule's guards (or it has none)."""
    if not rule.when:
        return True
    return any(
        all(getattr(data, name, None) in allowed for name, allowed in guard) for guard in rule.when
    )


def advance(lifecycle: Lifecycle, event: Event, srv_ms: int | None = None) -> Lifecycle:
    """Apply one event to a lifecycle; raise InvalidTransition for anything the table forbids.

    `srv_ms` is the server time the event was stored at (or will be); when given, `expired`
    must not precede the preparation deadline.
    """
    state = lifecycle.state
    kind = event.type
    if kind in ANNOTATION_TYPES:
        if state == "NONE":
            raise InvalidTransition(state, kind, "an annotation needs a prepared stream")
        return msgspec.structs.replace(
            lifecycle,
            annotations=lifecycle.annotations + 1,
            queued=lifecycle.queued or kind == "dispatch_queued",
        )
    rule = rule_for(state, kind)
    if rule is None:
        raise InvalidTransition(state, kind)
    if kind == "prepared" and event.seq != 1:
        raise InvalidTransition(state, kind, "prepared must be the first event")
    if rule.when and not guards_hold(rule, event.data):
        raise InvalidTransition(state, kind, "its data does not fit this state")
    if rule.need:
        _check_need(lifecycle, rule, event, srv_ms)
    return _record(lifecycle, rule.to, event, srv_ms)


def _check_need(lifecycle: Lifecycle, rule: Rule, event: Event, srv_ms: int | None) -> None:
    state, kind = lifecycle.state, event.type
    if rule.need == "deadline":
        prepared = lifecycle.prepared
        if srv_ms is not None and prepared is not None and srv_ms < prepared.expires_ms:
            raise InvalidTransition(state, kind, "expired before the preparation deadline")
    elif rule.need == "append_sent":
        if lifecycle.claimed is None or not lifecycle.claimed.append_sent:
            raise InvalidTransition(state, kind, "the claim did not ask for a Sent copy")
    elif rule.need in ("recovery", "halted") and not event.actor.startswith("recovery:"):
        raise InvalidTransition(state, kind, "only recovery may classify a dispatch")
    elif rule.need == "operator" and not event.actor.startswith("operator:"):
        raise InvalidTransition(state, kind, "only an operator may resolve a send")
    elif rule.need == "evidence" and not event.actor.startswith(("recovery:", "operator:")):
        raise InvalidTransition(state, kind, "only recovery or an operator may record evidence")
    elif rule.need in ("approval", "unapproved"):
        _check_approval(lifecycle, rule, event)


def awaits_approval(lifecycle: Lifecycle) -> bool:
    """Tell whether a claim now is refused for want of the approval the preparation requires."""
    rule = rule_for(lifecycle.state, "claimed")
    prepared = lifecycle.prepared
    return (
        rule is not None
        and rule.need == "unapproved"
        and prepared is not None
        and not isinstance(prepared.approval, UnsetType)
    )


def _check_approval(lifecycle: Lifecycle, rule: Rule, event: Event) -> None:
    state, kind = lifecycle.state, event.type
    if rule.need == "unapproved":
        if awaits_approval(lifecycle):
            raise InvalidTransition(state, kind, "the preparation requires an approval first")
        return
    prepared = lifecycle.prepared
    required = (
        None
        if prepared is None or isinstance(prepared.approval, UnsetType)
        else (prepared.approval)
    )
    data = event.data
    if required is None or not isinstance(data, Approved) or not accepts(required, data.mode):
        raise InvalidTransition(state, kind, "the preparation requires no approval of this kind")
    if not event.actor.startswith("api:"):
        raise InvalidTransition(state, kind, "only the service records an approval")


def _record(lifecycle: Lifecycle, to: State, event: Event, srv_ms: int | None) -> Lifecycle:
    data = event.data
    kind = event.type
    count = lifecycle.lifecycle_events + 1
    if isinstance(data, OperatorResolution):  # the lifecycle itself does not move
        return msgspec.structs.replace(
            lifecycle, resolutions=(*lifecycle.resolutions, data), lifecycle_events=count
        )
    # Which event later decisions need, if any: one replace per event, no dict of changes.
    replace = msgspec.structs.replace
    if isinstance(data, Prepared):
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, prepared=data
        )
    if isinstance(data, Approved):
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, approved=data
        )
    if isinstance(data, Claimed):
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, claimed=data,
            claimed_srv_ms=srv_ms,
        )  # fmt: skip
    if isinstance(data, SmtpAttemptStarted):
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, attempt=data
        )
    if isinstance(data, SmtpCommitPoint):
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, commit=data
        )
    if kind in DISPATCH_TERMINAL_TYPES:
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, terminal=data,
            terminal_srv_ms=srv_ms,
        )  # fmt: skip
    if isinstance(data, OutcomeEvidence):  # the terminal (what made it unknown) stays
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count, evidence=data
        )
    if kind == "sent_filing_started":
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count,
            filing_srv_ms=srv_ms,
        )  # fmt: skip
    if isinstance(data, SentFilingSucceeded | SentFilingFailed):
        return replace(
            lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count,
            filing_result=data,
        )  # fmt: skip
    return replace(lifecycle, state=to, last_lifecycle_type=kind, lifecycle_events=count)


def fold(events: Sequence[Event], srv_ms: Sequence[int] | None = None) -> Lifecycle:
    """Fold a whole stream's events (with their server times, when known) into a Lifecycle."""
    lifecycle = Lifecycle()
    for position, event in enumerate(events):
        lifecycle = advance(lifecycle, event, None if srv_ms is None else srv_ms[position])
    return lifecycle


def state_after_types(types: Sequence[str]) -> State:
    """Fold by event type alone, as the Lua scripts do; raise InvalidTransition when stuck."""
    state: State = "NONE"
    for kind in types:
        if kind in ANNOTATION_TYPES:
            if state == "NONE":
                raise InvalidTransition(state, kind, "an annotation needs a prepared stream")
            continue
        rule = rule_for(state, kind)
        if rule is None:
            raise InvalidTransition(state, kind)
        state = rule.to
    return state
