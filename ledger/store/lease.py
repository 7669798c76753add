"""This process's dispatcher lease: proof of life that keeps recovery away from live claims.

Each refresh also re-reads the store (ledger/store/durability/monitor.py), so a store that
stops being durable, or went back in time, is noticed within one refresh interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from ledger.background import cancel_and_wait
from ledger.ids import new_id
from ledger.store.durability.monitor import StoreMonitor
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError

log = structlog.get_logger("angelos.ledger.lease")


class Lease:
    """Refresh `lease:<dispatcher_id>` every refresh interval while the process runs."""

    def __init__(
        self,
        store: LedgerStore,
        lease_ms: int,
        refresh_ms: int,
        monitor: StoreMonitor | None = None,
    ) -> None:
        self.store = store
        self.dispatcher_id = new_id()
        self.lease_ms = lease_ms
        self.refresh_ms = refresh_ms
        self.monitor = monitor
        self._sent_ok = float("-inf")  # when the last confirmed refresh was sent (monotonic)
        self._task: asyncio.Task[None] | None = None
        self._refreshing = asyncio.Lock()
        self._tried = float("-inf")  # when the last refresh was sent, confirmed or not
        self._answer = False  # whether that refresh was confirmed

    @property
    def fresh_s(self) -> float:
        """How long after a refresh was sent this process still counts on its lease.

        Two thirds of the lease: the key lives `lease_ms` from when Redis stored it, which is
        after the refresh was sent, so this leaves a third for clock-rate differences.
        """
        return self.lease_ms * 2 / 3 / 1000

    def fresh(self) -> bool:
        """Tell whether the lease is certainly still held in the store."""
        return time.monotonic() - self._sent_ok < self.fresh_s

    async def refresh(self) -> bool:
        """Refresh once; False when the store did not confirm.

        Callers that arrive while a refresh is in flight share its result (a stale lease found
        by many waiting dispatches at once costs one write).
        """
        queued = time.monotonic()
        async with self._refreshing:
            if self._tried >= queued:
                return self._answer  # one sent after this call arrived: its answer is ours
            sent = self._tried = time.monotonic()
            try:
                await self.store.refresh_lease(self.dispatcher_id, self.lease_ms)
            except MailError:
                log.warning("lease_refresh_failed")
                self._answer = False
                return False
            self._sent_ok, self._answer = sent, True
            return True

    async def start(self) -> None:
        """Take the lease now and keep refreshing it in the background."""
        await self.refresh()
        self._task = asyncio.create_task(self._loop(), name="dispatcher-lease")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_ms / 1000)
            await self.refresh()
            if self.monitor is not None:
                try:
                    await self.monitor.check(self.store.client)
                except Exception:  # the next refresh reads it again
                    log.warning("ledger_store_check_failed")

    async def stop(self) -> None:
        """Stop refreshing and delete the lease (after running dispatches have ended)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
        with contextlib.suppress(MailError):
            await self.store.release_lease(self.dispatcher_id)
