"""A dispatch's ledger writes: gates before the network, closing events after, fenced by recovery.

Two kinds of write. A gate (the attempt marker, the commit point, the Sent filing start) must
be recorded, durable and covered by this host's rollback witness before the network step it
opens; if it is not, the step is not taken. A closing event (an abort, a rejection, the
provider's verdict, the filing result) is owed whatever happens: if the store cannot take it
now, the closer (ledger/dispatch/closer.py) keeps it until it can.
"""

from __future__ import annotations

import asyncio

import structlog
from msgspec import Struct

from ledger.dispatch.closer import CloseIntent, Closer, Recorded
from ledger.ids import new_id
from ledger.store.answers import AppendOutcome, Head
from ledger.store.durability.monitor import StoreMonitor
from ledger.store.durability.witness import WitnessError
from ledger.store.lease import Lease
from ledger.store.ledger_store import LedgerStore
from schemas import errors
from schemas.ledger import LedgerUnavailable
from schemas.ledger_events import EventData, LateOutcomeObserved
from schemas.send import PERSISTENCE_WARNING

log = structlog.get_logger("angelos.ledger.dispatch")


class DispatchSettings(Struct, frozen=True, kw_only=True):
    """The timing and durability settings the pipeline itself uses (docs/configuration.md)."""

    tool_deadline_s: float = 90.0
    dispatch_deadline_s: float = 780.0
    termination_timeout_s: float = 600.0
    outcome_persist_window_s: float = 600.0
    sent_filing_timeout_s: float = 30.0
    claim_to_attempt_s: float = 60.0


class Closed(Exception):
    """Recovery (or another writer) already closed this dispatch; replay what it recorded."""


class Run:
    """The state of one dispatch as it moves through the pipeline."""

    def __init__(
        self, pid: str, owner: str, digest: str, append_sent: bool, grant: str | None = None
    ) -> None:
        self.pid = pid
        self.owner = owner
        self.grant = grant  # first-party mode: the confirming token's grant binding
        self.digest = digest
        self.append_sent = append_sent
        self.message_id = ""
        self.head: Head | None = None
        self.started_at = 0.0  # monotonic: the claim, or the end of a wait for a connection
        self.queued = False  # waiting for a connection right now
        self.waited = False  # waited for a connection at some point
        self.claim_srv_ms = 0  # Redis time of the claim
        self.claim_confirmed = True  # the claim's required WAIT/WAITAOF confirmed it
        self.warnings: list[str] = []


class RunWriter:
    """Writes a dispatch's gates and closing events; a refused gate means recovery closed it."""

    def __init__(
        self,
        store: LedgerStore,
        lease: Lease,
        settings: DispatchSettings,
        actor: str,
        api_actor: str,
        *,
        closer: Closer | None = None,
        monitor: StoreMonitor | None = None,
    ) -> None:
        self.store = store
        self.lease = lease
        self.settings = settings
        self.actor = actor
        self.api_actor = api_actor
        self.closer = closer or Closer(store)
        self.monitor = monitor
        self._background: set[asyncio.Task[None]] = set()

    def blocked(self) -> str:
        """Say why no new claim may be made now ("" when it may)."""
        return "" if self.monitor is None else self.monitor.blocked

    def alive(self) -> bool:
        """Tell whether this process may take a send's next network step: its lease is certainly
        held, and the store is durable and not halted for a rollback."""
        return self.lease.fresh() and (self.monitor is None or self.monitor.network_ok())

    async def vouch(self) -> bool:
        """Like `alive`, but a lease gone stale (a store that was slow or away, a busy loop) is
        refreshed once first: a send waits for one round trip rather than being given up."""
        if not self.alive() and (self.monitor is None or self.monitor.network_ok()):
            await self.lease.refresh()
        return self.alive()

    async def gate(self, run: Run, data: EventData, *, witnessed: bool = False) -> bool:
        """Append an event that opens a network step; True only when it is recorded, durable,
        and (`witnessed`) kept by the rollback witness. Closed when recovery closed the
        dispatch first."""
        assert run.head is not None
        eid = new_id()
        while True:
            try:
                outcome = await self.store.append(
                    run.pid, run.head, data, actor=self.actor, eid=eid
                )
            except LedgerUnavailable:  # the store's retry policy has given up
                return False
            if outcome.result in ("appended", "duplicate") and outcome.head is not None:
                run.head = outcome.head
                break
            if outcome.result == "halted":
                return False  # the store went back in time: no network step now
            if not self.annotations_only(run, outcome):
                raise Closed()
        if not outcome.confirmed:  # not on the replicas (or disk) the settings require
            return False
        return not witnessed or await self._witnessed(outcome)

    async def close(
        self,
        run: Run,
        *events: EventData,
        late: LateOutcomeObserved | None = None,
        patience_s: float = 0.0,
    ) -> Recorded:
        """Record the first of `events` the stream's state allows, now or (kept) later.

        `fenced`: someone else closed the dispatch first; with `late`, that annotation was
        written. Waits up to `patience_s` for a store that does not answer before leaving the
        event to the closer.
        """
        intent = CloseIntent(pid=run.pid, eid=new_id(), actor=self.actor, events=events, late=late)
        recorded, head = await self.closer.record(intent, run.head, patience_s=patience_s)
        if head is not None:
            run.head = head
        if recorded == "later":
            run.warnings.append(PERSISTENCE_WARNING)
        return recorded

    async def close_or_replay(self, run: Run, *events: EventData) -> None:
        """Record a closing event; Closed when someone else closed the dispatch first."""
        if await self.close(run, *events) == "fenced":
            raise Closed()

    async def note(self, run: Run, data: EventData) -> None:
        """Append an annotation after the run's head; it only informs, so a failure is logged."""
        assert run.head is not None
        try:
            outcome = await self.store.append(
                run.pid, run.head, data, actor=self.actor, eid=new_id()
            )
        except LedgerUnavailable:
            outcome = None
        if (
            outcome is not None
            and outcome.head is not None
            and outcome.result in ("appended", "duplicate")
        ):
            run.head = outcome.head
        else:  # the cap was reached, or the next lifecycle append will meet what happened
            log.warning("annotation_not_recorded", pid=run.pid, type=data.TYPE)

    def annotations_only(self, run: Run, outcome: AppendOutcome) -> bool:
        """Tell whether only annotations moved the head (the dispatch is still ours); adopt it.

        Callers may retry on True without an explicit bound: every such conflict means a new
        annotation, and a stream takes at most SEND_ANNOTATION_CAP of them.
        """
        assert run.head is not None
        if outcome.result != "conflict" or outcome.head is None:
            return False
        if outcome.head.state != run.head.state:
            return False
        run.head = outcome.head
        return True

    async def _witnessed(self, outcome: AppendOutcome) -> bool:
        """Keep the gate's ledger clock in this host's witness before the step it opens."""
        witness = self.store.witness
        if witness is None:
            return True
        try:
            clock = outcome.clock
            if not clock:  # an earlier try landed: the store's clock now covers it
                clock, halt = await self.store.guard()
                if halt is not None:
                    return False
            await witness.keep(clock)
        except (WitnessError, errors.MailError):
            log.error("send_witness_not_kept")
            return False
        return True

    def annotate_later(self, pid: str, head: Head, data: EventData) -> None:
        """Write an annotation without delaying the answer; failures are only logged."""
        task = asyncio.create_task(self.annotate(pid, head, data))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def annotate(self, pid: str, head: Head, data: EventData) -> None:
        try:
            await self.store.append(pid, head, data, actor=self.api_actor, eid=new_id())
        except errors.MailError:
            log.warning("annotation_not_recorded", pid=pid, type=data.TYPE)
