"""This process's dispatcher lease: proof of life that keeps recovery away from live claims."""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from ledger.ids import new_id
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError

log = structlog.get_logger("angelos.ledger.lease")


class Lease:
    """Refresh `lease:<dispatcher_id>` every refresh interval while the process runs."""

    def __init__(self, store: LedgerStore, lease_ms: int, refresh_ms: int) -> None:
        self.store = store
        self.dispatcher_id = new_id()
        self.lease_ms = lease_ms
        self.refresh_ms = refresh_ms
        self._last_ok = float("-inf")
        self._task: asyncio.Task[None] | None = None

    def fresh(self, within_s: float | None = None) -> bool:
        """Tell whether the last successful refresh is recent (default: two refresh periods)."""
        limit = 2 * self.refresh_ms / 1000 if within_s is None else within_s
        return time.monotonic() - self._last_ok < limit

    async def refresh(self) -> bool:
        """Refresh once; False when the store did not confirm."""
        try:
            await self.store.refresh_lease(self.dispatcher_id, self.lease_ms)
        except MailError:
            log.warning("lease_refresh_failed")
            return False
        self._last_ok = time.monotonic()
        return True

    async def start(self) -> None:
        """Take the lease now and keep refreshing it in the background."""
        await self.refresh()
        self._task = asyncio.create_task(self._loop(), name="dispatcher-lease")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_ms / 1000)
            await self.refresh()

    async def stop(self) -> None:
        """Stop refreshing and delete the lease (after running dispatches have ended)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(MailError):
            await self.store.release_lease(self.dispatcher_id)
