"""A dispatch's ledger writes: compare-and-append after the run's head, fenced by recovery."""

from __future__ import annotations

import asyncio

import structlog
from msgspec import Struct

from ledger.dispatch.outcomes import TerminalOutcome, stage_of, status_of
from ledger.ids import new_id
from ledger.store.answers import AppendOutcome, Head
from ledger.store.lease import Lease
from ledger.store.ledger_store import LedgerStore, head_of
from ledger.store.retry import RetryPolicy
from schemas import errors
from schemas.ledger import LedgerUnavailable
from schemas.ledger_events import EventData, LateOutcomeObserved, SmtpOutcomeUnknown

log = structlog.get_logger("angelos.ledger.dispatch")


class DispatchSettings(Struct, frozen=True, kw_only=True):
    """The timing and durability settings the pipeline itself uses (docs/configuration.md)."""

    tool_deadline_s: float = 90.0
    dispatch_deadline_s: float = 780.0
    termination_timeout_s: float = 600.0
    outcome_persist_window_s: float = 600.0
    sent_filing_timeout_s: float = 30.0
    claim_to_attempt_s: float = 60.0
    lease_fresh_s: float = 20.0
    waitaof: bool = False
    waitaof_replicas: int = 0
    fsync_timeout_ms: int = 2000
    fault_point: str = ""  # test builds only: "<point>[:exit|:stop]"


class Closed(Exception):
    """Recovery (or another writer) already closed this dispatch; replay what it recorded."""


class Run:
    """The state of one dispatch as it moves through the pipeline."""

    def __init__(self, pid: str, owner: str, digest: str, append_sent: bool) -> None:
        self.pid = pid
        self.owner = owner
        self.digest = digest
        self.append_sent = append_sent
        self.message_id = ""
        self.head: Head | None = None
        self.started_at = 0.0  # monotonic: the claim, or the end of a wait for a connection
        self.queued = False  # waiting for a connection right now
        self.waited = False  # waited for a connection at some point
        self.claim_srv_ms = 0  # Redis time of the claim
        self.warnings: list[str] = []


class RunWriter:
    """Appends a dispatch's events; a refused append means recovery closed it (Closed)."""

    def __init__(
        self,
        store: LedgerStore,
        lease: Lease,
        settings: DispatchSettings,
        actor: str,
        api_actor: str,
    ) -> None:
        self.store = store
        self.lease = lease
        self.settings = settings
        self.actor = actor
        self.api_actor = api_actor
        self._background: set[asyncio.Task[None]] = set()

    async def append(self, run: Run, data: EventData) -> None:
        """Append a lifecycle event after the run's head; Closed when fencing says no."""
        assert run.head is not None
        eid = new_id()
        while True:
            try:
                outcome = await self.store.append(
                    run.pid, run.head, data, actor=self.actor, eid=eid
                )
            except LedgerUnavailable:  # the store's retry policy has given up
                raise errors.OperationFailed(
                    "the send ledger did not record the dispatch step"
                ) from None
            if outcome.result in ("appended", "duplicate") and outcome.head is not None:
                run.head = outcome.head
                return
            if not self.annotations_only(run, outcome):
                raise Closed()

    def alive(self) -> bool:
        """Tell whether this process's lease was refreshed recently enough to keep writing."""
        return self.lease.fresh(self.settings.lease_fresh_s)

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

    async def append_before_network(self, run: Run, data: EventData) -> bool:
        """Append a marker that gates network work; False unless it is known durable."""
        try:
            await self.append(run, data)
        except errors.OperationFailed:
            return False
        return not self.settings.waitaof or await self.durable()

    async def persist_outcome(self, run: Run, outcome: TerminalOutcome) -> bool:
        """Record the terminal event, retrying the same eid while the lease is alive."""
        assert run.head is not None
        eid = new_id()
        # One attempt always (a paused process learns here that recovery closed the dispatch);
        # retries only while this process's lease shows it is alive.
        policy = RetryPolicy(
            attempts=None, backoff_s=0.1, cap_s=5.0,
            deadline_s=self.settings.outcome_persist_window_s,
        )  # fmt: skip
        while True:
            try:
                result = await self.store.append(
                    run.pid, run.head, outcome, actor=self.actor, eid=eid,
                    retry=policy, still_wanted=self.alive,
                )  # fmt: skip
            except LedgerUnavailable:
                return False
            if result.result in ("appended", "duplicate") and result.head is not None:
                run.head = result.head
                return True
            if self.annotations_only(run, result):
                continue  # a duplicate-confirm storm is no reason to give up the outcome
            await self.late_outcome(run, outcome)
            return True

    async def late_outcome(self, run: Run, outcome: TerminalOutcome) -> None:
        """Recovery closed the dispatch first: keep its verdict, annotate what we learned."""
        status = status_of(outcome)
        _, entries = await self.store.read(run.pid)
        head = head_of(entries)
        if head is None:
            return
        note = LateOutcomeObserved(
            outcome=status,
            stage=stage_of(outcome),
            reply_code=0 if isinstance(outcome, SmtpOutcomeUnknown) else outcome.reply_code,
        )
        await self.annotate(run.pid, head, note)
        log.warning("late_outcome_observed", pid=run.pid, outcome=status)

    async def durable(self) -> bool:
        try:
            return await self.store.wait_durable(
                replicas=self.settings.waitaof_replicas, timeout_ms=self.settings.fsync_timeout_ms
            )
        except errors.MailError:
            return False

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
