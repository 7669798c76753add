"""Stopping a background loop for sure.

On Python 3.11 a cancellation that arrives in the same loop turn as the result of the
awaitable a task is waiting on can be lost (CPython gh-86296, in `asyncio.wait_for` and in
redis-py's connection set-up), and a loop that survives its cancel keeps a shutdown waiting
forever. So the cancel is repeated until the task has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

RECANCEL_S: Final = 0.1


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel `task` (again, while it survives a cancel) and return once it has ended."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_S)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()  # retrieved, so an exception it ended with is not reported as unseen
