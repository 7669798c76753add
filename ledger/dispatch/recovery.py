"""Recovery and the expiry sweeper: close what dead dispatchers left.

Recovery decides from the last durable lifecycle event only, and writes through the same
compare-and-append script as the dispatcher, which re-checks that the claim's dispatcher lease
is gone and the grace has passed. So a paused dispatcher that wakes up finds its next append
refused and, by the dispatch fencing rules, never connects or writes the terminator. Its
classifications contact no SMTP, IMAP or Graph server, and nothing is ever resent.

After a rollback (a recorded halt) the last durable event may be older than the truth, so the
usual conclusions ("no attempt marker: not sent", "expired: never claimed") are not drawn; the
scripts refuse them. Instead every open send, unclaimed preparations included, is quarantined
as unknown, and none of them is ever claimed again.

Given a finder (the provider files Sent itself), a pass also looks for the provider's own copy
of each unknown send past its grace (ledger/dispatch/evidence.py): reading the mailbox, never
sending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Final

import structlog
from msgspec import Struct

from ledger.chain import verified_events
from ledger.dispatch.decisions import Action, Decision, Kind, RecoveryReport
from ledger.dispatch.evidence import EvidencePass, SentCopyFinder
from ledger.dispatch.quarantine import Quarantine
from ledger.ids import new_id
from ledger.lifecycle import UNCLAIMED, Lifecycle, fold, grace_for
from ledger.store.answers import Head, OpenMember
from ledger.store.bulk import BulkReader, pages
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.errors import MailError
from schemas.ledger import LedgerEntry
from schemas.ledger_events import (
    EventData,
    Expired,
    RecoveryClassified,
    RollbackQuarantined,
    SentFilingFailed,
)

log = structlog.get_logger("angelos.ledger.recovery")
PAGE: Final = 256  # candidates read and decided per round trip
_OPEN_DISPATCH: Final = frozenset({"CLAIMED", "ATTEMPTING", "COMMITTED"})


def classify(lifecycle: Lifecycle, now_ms: int) -> EventData | None:
    """Return the event recovery writes for an abandoned stream, or None when it is not open.

    CLAIMED → not_attempted (I3: no attempt marker, nothing sent); ATTEMPTING → not_submitted
    (I4: no commit point, not submitted); COMMITTED → unknown (may have been accepted);
    FILING → the Sent filing's outcome is unknown. Nothing else is recovery's business.
    """
    age = max(0, now_ms - (lifecycle.claimed_srv_ms or now_ms))
    if lifecycle.state == "CLAIMED":
        return RecoveryClassified(
            classification="not_attempted",
            stage="not_attempted",
            claim_age_ms=age,
            last_lifecycle_type="claimed",
        )
    if lifecycle.state == "ATTEMPTING":
        return RecoveryClassified(
            classification="not_submitted",
            stage="interrupted",
            claim_age_ms=age,
            last_lifecycle_type="smtp_attempt_started",
        )
    if lifecycle.state == "COMMITTED":
        graph = lifecycle.attempt is not None and lifecycle.attempt.transport == "microsoft_graph"
        return RecoveryClassified(
            classification="unknown",
            stage="graph_submission" if graph else "acknowledgement",
            claim_age_ms=age,
            last_lifecycle_type="smtp_commit_point",
        )
    if lifecycle.state == "FILING":
        return SentFilingFailed(outcome="unknown", reason="process_lost")
    return None


def verdict_of(data: EventData) -> str:
    """Say in a few words what the recovery event makes of the send."""
    if isinstance(data, RecoveryClassified):
        status = "unknown" if data.classification == "unknown" else "rejected"
        return f"{status}/{data.stage}"
    if isinstance(data, SentFilingFailed):
        return "accepted/sent_filing_unknown"
    if isinstance(data, RollbackQuarantined):
        return "unknown/store_rollback"
    return "expired"


class _Open(Struct, frozen=True):
    """One decided-to-write candidate awaiting its append."""

    pid: str
    kind: Kind
    head: Head
    data: EventData
    dispatcher_id: str
    last_type: str
    since: int


class Recoverer:
    """Runs recovery passes over one namespace: open claims and filings, expiries, evidence.

    `finder` searches the provider's Sent folder; give it only where the provider files its
    own copy of every message it accepts.
    """

    def __init__(
        self,
        store: LedgerStore,
        *,
        worker_id: str | None = None,
        grace_ms: int | None = None,
        page: int = PAGE,
        finder: SentCopyFinder | None = None,
    ) -> None:
        self.store = store
        self.reader = BulkReader(store.client, store.keys)
        self.worker_id = worker_id or new_id()
        self.grace_ms = store.settings.recovery_grace_ms if grace_ms is None else grace_ms
        self.page = page
        self.finder = finder

    @property
    def actor(self) -> str:
        """Return the actor recovery events carry."""
        return f"recovery:{self.worker_id}"

    @property
    def sweeper(self) -> str:
        """Return the actor expiry events carry."""
        return f"sweeper:{self.worker_id}"

    async def run_once(
        self, *, dry_run: bool = False, progress: Callable[[int], None] | None = None
    ) -> RecoveryReport:
        """Examine every open claim, open filing and due preparation once; never resend."""
        report = RecoveryReport(dry_run=dry_run, grace_ms=self.grace_ms)
        now = await self.store.server_time_ms()
        report.server_ms = now
        report.halt = await self.store.halt()
        if report.halt is not None:
            await Quarantine(self.store, self.reader, self.actor, self.page).run(report, progress)
            _log(report)
            return report
        # Claims still inside their grace are read too: each is reported with the time it
        # becomes decidable (by the grace recorded at its claim, if longer).
        for chunk in pages(await self.reader.open_members(now + 1), self.page):
            report.decisions += await self._recover(chunk, dry_run)
            if progress is not None:
                progress(len(report.decisions))
        for pids in pages(await self.reader.due_unclaimed(now), self.page):
            report.decisions += await self._sweep(pids, dry_run)
            if progress is not None:
                progress(len(report.decisions))
        searches = EvidencePass(
            self.store, self.reader, self.finder, actor=self.actor, grace_ms=self.grace_ms,
            page=self.page,
        )  # fmt: skip
        await searches.run(report, progress)
        _log(report)
        return report

    # ------------------------------------------------------------------ open claims

    async def _recover(self, members: Sequence[OpenMember], dry_run: bool) -> list[Decision]:
        now, streams = await self.reader.entries([m.pid for m in members])
        decisions: list[Decision | None] = []
        pending: list[tuple[int, _Open]] = []
        for member, entries in zip(members, streams, strict=True):
            decision, todo = await self._examine(member, entries, now, dry_run)
            decisions.append(decision)
            if todo is not None:
                pending.append((len(decisions) - 1, todo))
        alive = await self.reader.leases_alive([todo.dispatcher_id for _, todo in pending])
        writes: list[tuple[int, _Open]] = []
        for (position, todo), is_alive in zip(pending, alive, strict=True):
            if is_alive:
                decisions[position] = self._lease_alive(todo, now)
            elif dry_run:
                decisions[position] = Decision(
                    pid=todo.pid, kind=todo.kind, action="would_classify",
                    last_lifecycle_type=todo.last_type, verdict=verdict_of(todo.data),
                )  # fmt: skip
            else:
                writes.append((position, todo))
        results = await asyncio.gather(*(self._write(todo) for _, todo in writes))
        for (position, _), decision in zip(writes, results, strict=True):
            decisions[position] = decision
        return [d for d in decisions if d is not None]

    async def _examine(
        self, member: OpenMember, entries: list[LedgerEntry], now: int, dry_run: bool
    ) -> tuple[Decision | None, _Open | None]:
        pid, kind = member.pid, member.kind
        if not entries:
            log.warning("recovery_stream_gone", pid=pid, kind=kind)
            await self._forget(member, dry_run)
            return Decision(pid=pid, kind=kind, action="stream_gone"), None
        try:
            lifecycle = fold(verified_events(pid, entries), [e.srv_ms for e in entries])
        except MailError:
            log.critical("send_ledger_integrity_alarm", pid=pid, problem="recovery_read")
            return Decision(pid=pid, kind=kind, action="corrupt"), None
        open_now = (
            lifecycle.state in _OPEN_DISPATCH if kind == "dispatch" else lifecycle.state == "FILING"
        )
        if not open_now or lifecycle.claimed is None:
            await self._forget(member, dry_run)
            return Decision(
                pid=pid, kind=kind, action="already_closed",
                last_lifecycle_type=lifecycle.last_lifecycle_type,
            ), None  # fmt: skip
        since = lifecycle.filing_srv_ms if kind == "filing" else lifecycle.claimed_srv_ms
        data = classify(lifecycle, now)
        head = head_of(entries)
        grace = grace_for(lifecycle, self.grace_ms)
        if since is None or now - since < grace or data is None or head is None:
            return Decision(
                pid=pid, kind=kind, action="too_early",
                last_lifecycle_type=lifecycle.last_lifecycle_type,
                decidable_ms=(since or now) + grace,
            ), None  # fmt: skip
        todo = _Open(
            pid, kind, head, data, lifecycle.claimed.dispatcher_id,
            lifecycle.last_lifecycle_type, since,
        )  # fmt: skip
        return None, todo

    def _lease_alive(self, todo: _Open, now: int) -> Decision:
        if now - todo.since >= 2 * self.grace_ms:
            # A live process holding a claim this long is stuck: a person should look at it.
            log.warning("recovery_claim_held_too_long", pid=todo.pid, kind=todo.kind)
        return Decision(
            pid=todo.pid, kind=todo.kind, action="lease_alive", last_lifecycle_type=todo.last_type
        )

    async def _write(self, todo: _Open) -> Decision:
        try:
            outcome = await self.store.append(
                todo.pid, todo.head, todo.data, actor=self.actor, eid=new_id(),
                lease_of=todo.dispatcher_id,
            )  # fmt: skip
        except MailError:
            log.warning("recovery_append_failed", pid=todo.pid)
            return Decision(
                pid=todo.pid, kind=todo.kind, action="fenced", last_lifecycle_type=todo.last_type
            )
        result = outcome.result
        action: Action
        if result in ("appended", "duplicate"):
            action = "classified"
            log.warning(
                "recovery_classified", pid=todo.pid, kind=todo.kind, verdict=verdict_of(todo.data)
            )
        elif result in ("lease_alive", "too_early"):
            action = result
        elif result == "missing":
            action = "stream_gone"
        else:
            action = "fenced"  # conflict or invalid_transition: someone else decided first
        return Decision(
            pid=todo.pid, kind=todo.kind, action=action, last_lifecycle_type=todo.last_type,
            verdict=verdict_of(todo.data) if action == "classified" else "",
        )  # fmt: skip

    async def _forget(self, member: OpenMember, dry_run: bool) -> None:
        if not dry_run:
            await self.store.forget_open(member)

    # ------------------------------------------------------------------ expiry sweeper

    async def _sweep(self, pids: Sequence[str], dry_run: bool) -> list[Decision]:
        _, streams = await self.reader.entries(pids)
        decisions: list[Decision | None] = []
        writes: list[tuple[int, str, Head]] = []
        for pid, entries in zip(pids, streams, strict=True):
            head = head_of(entries) if entries else None
            if head is None:
                if not dry_run:
                    await self.store.forget_unclaimed(pid)
                decisions.append(Decision(pid=pid, kind="expiry", action="stream_gone"))
            elif head.state not in UNCLAIMED:
                if not dry_run:
                    await self.store.forget_unclaimed(pid)
                decisions.append(Decision(pid=pid, kind="expiry", action="already_closed"))
            elif dry_run:
                decisions.append(
                    Decision(pid=pid, kind="expiry", action="would_expire", verdict="expired")
                )
            else:
                decisions.append(None)
                writes.append((len(decisions) - 1, pid, head))
        results = await asyncio.gather(*(self._expire(pid, head) for _, pid, head in writes))
        for (position, _, _), decision in zip(writes, results, strict=True):
            decisions[position] = decision
        return [d for d in decisions if d is not None]

    async def _expire(self, pid: str, head: Head) -> Decision:
        try:
            outcome = await self.store.append(
                pid, head, Expired(reason="deadline_passed"), actor=self.sweeper, eid=new_id()
            )
        except MailError:
            log.warning("expiry_append_failed", pid=pid)
            return Decision(pid=pid, kind="expiry", action="fenced")
        if outcome.result in ("appended", "duplicate"):
            return Decision(pid=pid, kind="expiry", action="expired", verdict="expired")
        if outcome.result == "too_early":
            return Decision(pid=pid, kind="expiry", action="too_early")
        return Decision(pid=pid, kind="expiry", action="fenced")


def _log(report: RecoveryReport) -> None:
    counts = report.counts()
    if any(
        counts.get(a, 0)
        for a in ("classified", "expired", "quarantined", "evidenced", "corrupt", "stream_gone")
    ):
        log.info("recovery_pass", dry_run=report.dry_run, **counts)
