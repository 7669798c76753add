"""The rollback quarantine: after the store went back in time, every open send ends as unknown.

While a rollback halt is recorded, a send's last durable event may be older than the truth, so
recovery's usual conclusions ("no attempt marker: not sent", "expired: never claimed") are not
drawn (the scripts refuse them). Every open dispatch and every unclaimed preparation is closed
with `rollback_quarantined` instead, and none of them is ever claimed again. Nothing here
contacts SMTP, IMAP or Graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import structlog

from ledger.chain import verified_events
from ledger.dispatch.decisions import Decision, Kind, RecoveryReport
from ledger.ids import new_id
from ledger.lifecycle import QUARANTINABLE, UNCLAIMED, fold
from ledger.store.answers import Halt
from ledger.store.bulk import BulkReader, pages
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.errors import MailError
from schemas.ledger import LedgerEntry
from schemas.ledger_events import RollbackQuarantined

log = structlog.get_logger("angelos.ledger.recovery")
EVERYTHING: Final = 2**53  # a score above every stored time: the whole set


class Quarantine:
    """One quarantine pass over a namespace's open dispatches and unclaimed preparations."""

    def __init__(self, store: LedgerStore, reader: BulkReader, actor: str, page: int) -> None:
        self.store = store
        self.reader = reader
        self.actor = actor
        self.page = page

    async def run(self, report: RecoveryReport, progress: Callable[[int], None] | None) -> None:
        """Close every open dispatch and every unclaimed preparation as unknown (rollback)."""
        assert report.halt is not None
        members = await self.reader.open_members(EVERYTHING)
        pids = [m.pid for m in members if m.kind == "dispatch"]
        pids += await self.reader.due_unclaimed(EVERYTHING)
        for chunk in pages(list(dict.fromkeys(pids)), self.page):
            report.decisions += await self._quarantine(chunk, report.halt, report.dry_run)
            if progress is not None:
                progress(len(report.decisions))

    async def _quarantine(self, pids: Sequence[str], halt: Halt, dry_run: bool) -> list[Decision]:
        _, streams = await self.reader.entries(pids)
        decisions = []
        for pid, entries in zip(pids, streams, strict=True):
            decisions.append(await self._quarantine_one(pid, entries, halt, dry_run))
        return decisions

    async def _quarantine_one(
        self, pid: str, entries: list[LedgerEntry], halt: Halt, dry_run: bool
    ) -> Decision:
        if not entries:
            return Decision(pid=pid, kind="preparation", action="stream_gone")
        try:
            lifecycle = fold(verified_events(pid, entries), [e.srv_ms for e in entries])
        except MailError:
            log.critical("send_ledger_integrity_alarm", pid=pid, problem="quarantine_read")
            return Decision(pid=pid, kind="preparation", action="corrupt")
        kind: Kind = "preparation" if lifecycle.state in UNCLAIMED else "dispatch"
        last = lifecycle.last_lifecycle_type
        head = head_of(entries)
        if lifecycle.state not in QUARANTINABLE or head is None:
            return Decision(pid=pid, kind=kind, action="already_closed", last_lifecycle_type=last)
        if dry_run:
            return Decision(
                pid=pid, kind=kind, action="would_quarantine", last_lifecycle_type=last,
                verdict="unknown/store_rollback",
            )  # fmt: skip
        data = RollbackQuarantined(
            last_lifecycle_type=last,  # type: ignore[arg-type]
            detected_ms=halt.detected_ms,
            store_clock=halt.store_clock,
            witness_clock=halt.witness_clock,
        )
        try:
            outcome = await self.store.append(pid, head, data, actor=self.actor, eid=new_id())
        except MailError:
            log.warning("quarantine_append_failed", pid=pid)
            return Decision(pid=pid, kind=kind, action="fenced", last_lifecycle_type=last)
        if outcome.result not in ("appended", "duplicate"):
            return Decision(pid=pid, kind=kind, action="fenced", last_lifecycle_type=last)
        log.warning("send_quarantined_after_rollback", pid=pid, last_lifecycle_type=last)
        return Decision(
            pid=pid, kind=kind, action="quarantined", last_lifecycle_type=last,
            verdict="unknown/store_rollback",
        )  # fmt: skip
