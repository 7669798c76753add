"""The one retry policy of the ledger, in the manner of redis-py's Retry: which failures may be
retried, the backoff, its cap and a deadline.

The store's scripted writes run under it, because each carries an event id: a script that finds
its id already stored answers `duplicate` (a claim answers `ack_lost`), so repeating a write
whose reply was lost never writes twice. A refusal that comes before the script wrote anything
(out of memory, loading, busy, a read-only replica) is retried as well. The closer of a dispatch
(ledger/dispatch/closer.py) runs under it too, without a deadline, until its event lands.
Nothing on the network of a send (SMTP, IMAP, Graph) is ever under a retry policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis.exceptions as rex
from msgspec import Struct

from schemas.ledger import LedgerUnavailable

T = TypeVar("T")
# A lost connection or reply, a store that said it cannot write now (Redis refuses a script
# whose first write meets these before anything is written), or the store's own "unavailable".
_RETRYABLE = (
    rex.ConnectionError,  # BusyLoadingError (LOADING) among them
    rex.TimeoutError,
    rex.OutOfMemoryError,
    rex.ReadOnlyError,
    LedgerUnavailable,
    OSError,
)


class RetryPolicy(Struct, frozen=True, kw_only=True):
    """How often, how patiently and how long an idempotent ledger write is repeated."""

    attempts: int | None = 4  # tries in all, the first included; None: until the deadline
    backoff_s: float = 0.05  # the pause before the second try, doubled before each next one
    cap_s: float = 1.0  # the longest pause
    deadline_s: float | None = None  # no try starts later than this after the first

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        """Tell whether a failure may be followed by another try (it wrote nothing, or the same)."""
        if isinstance(exc, rex.ResponseError) and str(exc).startswith("BUSY"):
            return True  # another script runs too long; ours has not started
        return isinstance(exc, _RETRYABLE)

    async def call(
        self,
        operation: Callable[[], Awaitable[T]],
        *,
        still_wanted: Callable[[], bool] | None = None,
    ) -> T:
        """Run `operation`, repeating it after retryable failures while the policy allows.

        The first try always runs; `still_wanted` (when given) is asked before every later one.
        """
        started = time.monotonic()
        pause = self.backoff_s
        tries = 0
        while True:
            tries += 1
            try:
                return await operation()
            except BaseException as exc:
                if not self._another(exc, tries, started, pause):
                    raise
                if still_wanted is not None and not still_wanted():
                    raise
            await asyncio.sleep(min(pause, self.cap_s))
            pause *= 2

    def _another(self, exc: BaseException, tries: int, started: float, pause: float) -> bool:
        if not self.retryable(exc):
            return False
        if self.attempts is not None and tries >= self.attempts:
            return False
        if self.deadline_s is not None:
            return time.monotonic() + min(pause, self.cap_s) - started < self.deadline_s
        return True
