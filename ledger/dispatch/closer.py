"""Every claim closes: the closing events a dispatch could not write are written later.

A dispatch that loses its store after the claim cannot simply end: its claim would stay open for
as long as this process (and so its lease) lives, because recovery leaves live dispatchers
alone. Whatever closing event the dispatch owed (an abort before any connection, a rejection
before the end-of-data marker, the provider's verdict after it, a Sent filing result) becomes a
`CloseIntent`: kept in memory, journalled to disk (ledger/dispatch/journal.py), and retried
under the one retry policy until the store takes it. Each intent keeps one event id, so a retry
whose reply was lost never writes twice. If recovery (or a rollback quarantine) closed the
dispatch first, a verdict the dispatcher saw is written as `late_outcome_observed` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Final, Literal, Protocol

import msgspec
import structlog
from msgspec import Struct

from ledger.background import cancel_and_wait
from ledger.lifecycle import OPEN, guards_hold, rule_for, state_after_types
from ledger.store.answers import Head
from ledger.store.ledger_store import LedgerStore, head_of
from ledger.store.retry import RetryPolicy
from schemas.errors import MailError
from schemas.ledger import LedgerEntry, LedgerUnavailable
from schemas.ledger_events import DATA_CLASSES, EventData, LateOutcomeObserved

log = structlog.get_logger("angelos.ledger.closer")
# Until the store answers, a pending close is tried again every second at most.
CLOSER_POLICY: Final = RetryPolicy(attempts=None, backoff_s=0.2, cap_s=1.0)
_OPEN_DISPATCH: Final = OPEN - {"FILING"}
Recorded = Literal["now", "later", "fenced"]


class CloseIntent(Struct, frozen=True, kw_only=True):
    """A closing event owed to one stream: the first candidate the stream's state allows."""

    pid: str
    eid: str  # one id for every try, whichever candidate lands
    actor: str
    events: tuple[EventData, ...] = ()
    late: LateOutcomeObserved | None = None  # what to annotate when someone else closed it
    claim_eid: str = ""  # only if our claim landed (its reply was lost) is anything owed

    def to_json(self) -> bytes:
        """Encode for the journal (the event union needs its type names)."""
        record: dict[str, Any] = {
            "pid": self.pid,
            "eid": self.eid,
            "actor": self.actor,
            "events": [{"type": e.TYPE, "data": e} for e in self.events],
            "claim_eid": self.claim_eid,
        }
        if self.late is not None:
            record["late"] = self.late
        return msgspec.json.encode(record)

    @classmethod
    def from_json(cls, raw: bytes) -> CloseIntent:
        """Decode a journal record (strictly: an unknown type or field is an error)."""
        record = msgspec.json.decode(raw)
        events = tuple(
            msgspec.convert(item["data"], DATA_CLASSES[item["type"]]) for item in record["events"]
        )
        late = record.get("late")
        return cls(
            pid=record["pid"],
            eid=record["eid"],
            actor=record["actor"],
            events=events,  # type: ignore[arg-type]
            late=None if late is None else msgspec.convert(late, LateOutcomeObserved),
            claim_eid=record.get("claim_eid", ""),
        )


Decision = EventData | Literal["done", "wait"]


def decide(intent: CloseIntent, entries: Sequence[LedgerEntry]) -> Decision:
    """Choose what to write now: a candidate, the late annotation, nothing (done), or wait.

    `wait`: the stream is still open in a state before the one the intent expects, which only
    a store that went back in time produces; the rollback quarantine will close it.
    """
    if not entries or any(entry.eid == intent.eid for entry in entries):
        return "done"  # gone, or an earlier try landed
    if intent.claim_eid and not any(entry.eid == intent.claim_eid for entry in entries):
        return "done"  # our claim never landed: nothing was consumed
    state = state_after_types([entry.t for entry in entries])
    for candidate in intent.events:
        rule = rule_for(state, candidate.TYPE)
        if rule is not None and not rule.need and guards_hold(rule, candidate):
            return candidate
    if state in _OPEN_DISPATCH:
        return "wait"
    return intent.late if intent.late is not None else "done"


class IntentLog(Protocol):
    """Where pending intents survive a restart (ledger/dispatch/journal.py)."""

    async def add(self, intent: CloseIntent) -> None:
        """Keep an intent until `done` is called for it."""

    async def done(self, intent: CloseIntent) -> None:
        """Forget an intent that landed (or that nothing is owed for any more)."""


class Closer:
    """Writes closing events now if it can, else keeps them until the store takes them."""

    def __init__(self, store: LedgerStore, journal: IntentLog | None = None) -> None:
        self.store = store
        self.journal = journal
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """How many closing events wait for the store."""
        return len(self._tasks)

    async def record(
        self, intent: CloseIntent, head: Head | None, *, patience_s: float = 0.0
    ) -> tuple[Recorded, Head | None]:
        """Write the closing event: `now`, `later` (kept and retried), or `fenced` (someone
        else closed the stream first; the late annotation, if any, was written). Also returns
        the stream's head after a write made now, when known.

        A store that does not answer is tried again for up to `patience_s` before the intent
        is journalled and left to the background.
        """
        if head is not None:
            with contextlib.suppress(LedgerUnavailable):
                fast = await self._append_after(intent, head)
                if fast is not None:
                    return "now", fast
        policy = msgspec.structs.replace(CLOSER_POLICY, deadline_s=patience_s)
        try:
            if patience_s > 0:
                return await policy.call(lambda: self._once(intent))
            return await self._once(intent)
        except LedgerUnavailable:
            await self.keep(intent)
            return "later", None

    async def keep(self, intent: CloseIntent) -> None:
        """Journal the intent and retry it in the background until it lands."""
        log.warning("send_close_deferred", pid=intent.pid)
        if self.journal is not None:
            await self.journal.add(intent)
        self.adopt(intent)

    def adopt(self, intent: CloseIntent) -> None:
        """Retry an intent in the background (one journalled earlier, perhaps by a dead process)."""
        task = asyncio.create_task(self._until_closed(intent), name=f"close-{intent.pid[:8]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait_idle(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) for the pending closes; what remains stays journalled."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def stop(self) -> None:
        """Stop retrying (shutdown): the journal keeps what is still owed."""
        await asyncio.gather(*(cancel_and_wait(task) for task in list(self._tasks)))

    # ------------------------------------------------------------------ internals

    async def _append_after(self, intent: CloseIntent, head: Head) -> Head | None:
        """The common case: the dispatch knows its head; None when the stream moved."""
        fits = [e for e in intent.events if _fits(head.state, e)]
        if not fits:
            return None
        outcome = await self.store.append(
            intent.pid, head, fits[0], actor=intent.actor, eid=intent.eid
        )
        return outcome.head if outcome.result in ("appended", "duplicate") else None

    async def _once(self, intent: CloseIntent) -> tuple[Recorded, Head | None]:
        """Read, decide and write once; LedgerUnavailable when the store cannot take it now."""
        _, entries = await self.store.read(intent.pid)
        choice = decide(intent, entries)
        if choice == "wait":
            raise LedgerUnavailable("the stream cannot be closed yet", maybe_applied=False)
        if choice == "done":
            landed = any(entry.eid == intent.eid for entry in entries)
            return ("now" if landed else "fenced"), head_of(entries)
        head = head_of(entries)
        assert head is not None
        outcome = await self.store.append(
            intent.pid, head, choice, actor=intent.actor, eid=intent.eid
        )
        if outcome.result in ("conflict", "invalid_transition"):
            raise LedgerUnavailable("the stream moved; read it again", maybe_applied=False)
        if isinstance(choice, LateOutcomeObserved):
            log.warning("late_outcome_observed", pid=intent.pid, outcome=choice.outcome)
            return "fenced", outcome.head
        return "now", outcome.head

    async def _until_closed(self, intent: CloseIntent) -> None:
        try:
            recorded, _ = await CLOSER_POLICY.call(lambda: self._once(intent))
        except MailError:  # a corrupt stream: nothing can be decided; a person must look
            log.critical("send_ledger_integrity_alarm", pid=intent.pid, problem="closer_read")
            return
        log.warning("send_close_recorded", pid=intent.pid, recorded=recorded)
        if self.journal is not None:
            await self.journal.done(intent)


def _fits(state: str, data: EventData) -> bool:
    rule = rule_for(state, data.TYPE)  # type: ignore[arg-type]
    return rule is not None and not rule.need and guards_hold(rule, data)
