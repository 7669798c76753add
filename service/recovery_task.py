"""The recovery background task every server process runs."""

from __future__ import annotations

import asyncio
import contextlib
import random

import structlog

from ledger.background import cancel_and_wait
from ledger.dispatch.decisions import RecoveryReport
from ledger.dispatch.recovery import Recoverer
from schemas.errors import MailError
from service.config import StoreConfig
from service.sending import Sending

log = structlog.get_logger("angelos.recovery")


class RecoveryTask:
    """Run a recovery pass every interval until stopped; a failed pass is logged and retried.

    `wake` starts the next pass at once: the store monitor calls it when the store's state
    changes, so a detected rollback is quarantined without waiting for the interval.
    """

    def __init__(self, recoverer: Recoverer, interval_s: float) -> None:
        self.recoverer = recoverer
        self.interval_s = interval_s
        self.passes = 0
        self.last: RecoveryReport | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Run the next pass now."""
        self._wake.set()

    def start(self) -> None:
        """Start the loop in the background."""
        self._task = asyncio.create_task(self._loop(), name="send-recovery")

    async def stop(self) -> None:
        """Stop the loop; a pass in flight is cancelled (its appends are each atomic)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        self._wake.clear()

    async def _loop(self) -> None:
        # A random first delay spreads the passes of processes started together.
        await self._pause(random.uniform(0.1, 1.0) * self.interval_s)
        while True:
            try:
                self.last = await self.recoverer.run_once()
            except MailError:
                log.warning("recovery_pass_failed")
            except Exception:  # never let the loop die; the next pass tries again
                log.exception("recovery_pass_crashed")
            self.passes += 1
            await self._pause(self.interval_s)


def start_recovery(store_config: StoreConfig | None, sending: Sending) -> RecoveryTask | None:
    """Start recovery when the ledger store passed its self-check (sending itself may be off)."""
    if store_config is None or sending.store is None:
        return None
    report = sending.report
    if report is None or not (report.usable or report.durability_only):
        return None
    recoverer = Recoverer(sending.store, finder=sending.sent_copies)
    task = RecoveryTask(recoverer, store_config.recovery_interval_s)
    if sending.monitor is not None:
        sending.monitor.listeners.append(task.wake)
    task.start()
    return task
