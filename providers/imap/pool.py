"""A per-process pool of logged-in IMAP sessions, so a call does not pay for a fresh login.

What a user of `pool.session()` may assume: the session is logged in, usable, has a fresh
12 MiB read budget and *no* mailbox selected as far as its API is concerned. The server may
still have the previous user's mailbox selected, so every user must SELECT or EXAMINE before
any selected-state command; the session refuses such commands until it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from providers.imap.session import ImapSession
from schemas.errors import MailError, ServiceUnavailable

IDLE_CHECK_AFTER_S = 30.0


class ImapPool:
    """At most `size` sessions; idle ones are reused (most recent first) and NOOP-checked."""

    def __init__(
        self,
        open_session: Callable[[], Awaitable[ImapSession]],
        *,
        size: int = 4,
        idle_check_after_s: float = IDLE_CHECK_AFTER_S,
    ) -> None:
        if size < 1:
            raise ValueError("pool size must be at least 1")
        self._open_session = open_session
        self._idle_check_after_s = idle_check_after_s
        self._slots = asyncio.Semaphore(size)
        self._idle: list[ImapSession] = []
        self._closed = False

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[ImapSession]:
        """Lend a logged-in session for one operation; it returns to the pool afterwards."""
        if self._closed:
            raise ServiceUnavailable("the mailbox connection pool is closed")
        async with self._slots:
            session = await self._checkout()
            try:
                yield session
            finally:
                await self._checkin(session)

    async def aclose(self) -> None:
        """Log out every idle session; sessions still lent out are closed when returned."""
        self._closed = True
        idle, self._idle = self._idle, []
        await asyncio.gather(*(s.logout() for s in idle), return_exceptions=True)

    async def _checkout(self) -> ImapSession:
        while self._idle:
            session = self._idle.pop()
            try:
                alive = session.usable and await self._still_alive(session)
            except BaseException:  # cancelled during the NOOP: the session is in no list now
                await session.close()
                raise
            if alive:
                session.begin_lease()
                return session
            await session.close()
        session = await self._open_session()
        session.begin_lease()
        return session

    async def _still_alive(self, session: ImapSession) -> bool:
        if time.monotonic() - session.last_used <= self._idle_check_after_s:
            return True
        try:
            await session.noop()
        except MailError:
            return False
        return session.usable

    async def _checkin(self, session: ImapSession) -> None:
        if self._closed:
            await session.logout()
        elif session.usable:
            self._idle.append(session)
        else:
            await session.close()
