"""A per-process pool of authenticated SMTP sessions (SMTP_MAX_CONNECTIONS, default 4).

At most `max_connections` submissions hold a connection at once; the others wait their turn in
arrival order, and waiting never fails a send. A session goes back to the pool only after its
transaction was accepted (2xx to the end-of-data marker): any refusal, ambiguous or unexpected
reply, timeout or TLS error closes it. Before a kept session carries another message it must
answer RSET; if it does not (the server timed it out, say), it is closed and a fresh connection
is opened instead. The probe precedes every command of the new message, so no part of that
message is ever repeated. Nothing in this module writes the end-of-data marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from providers.smtp.session import Channel, open_session
from providers.smtp.settings import TLS_MODES, SmtpSettings
from providers.smtp.submitter import (
    SmtpSubmission,
    check_submittable,
    quit_channel,
    transact,
)
from schemas.submission import Envelope, NotSent, SmtpEndpoint

DEFAULT_MAX_CONNECTIONS = 4
# Idle sessions older than this are closed, not probed: servers commonly drop idle clients
# after a few minutes (RFC 5321 §4.5.3.2.7 suggests 5), and a probe of a dead one costs a round
# trip at best and MAIL_TIMEOUT at worst.
IDLE_LIMIT_S = 60.0
# Servers may cap the messages of one session; opening a fresh one now and then stays clear.
MESSAGES_PER_SESSION = 100


class _Session:
    """An authenticated connection and how much it has carried."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.messages = 0
        self.idle_since = 0.0


class SmtpPool:
    """Hands out connection slots and keeps accepted sessions for the next message."""

    def __init__(
        self,
        settings: SmtpSettings,
        max_connections: int,
        *,
        idle_limit_s: float = IDLE_LIMIT_S,
        messages_per_session: int = MESSAGES_PER_SESSION,
    ) -> None:
        if settings.tls_mode not in TLS_MODES:
            raise ValueError("tls_mode must be 'tls' or 'starttls'")
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._settings = settings
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Session] = []
        self._waiting = 0
        self._closed = False
        self._idle_limit_s = idle_limit_s
        self._messages_per_session = messages_per_session
        self.capacity = max_connections

    @property
    def endpoint(self) -> SmtpEndpoint:
        """The configured destination, for the `smtp_attempt_started` event."""
        return self._settings.endpoint

    @property
    def waiting(self) -> int:
        """How many submissions wait for a slot right now."""
        return self._waiting

    def busy(self) -> bool:
        """Tell whether a new submission would have to wait for a slot."""
        return self._slots.locked()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[PooledSlot]:
        """Wait for a free slot, then hold it until the block ends."""
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        slot = PooledSlot(self)
        try:
            yield slot
        finally:
            slot.drop()
            self._slots.release()

    async def aclose(self) -> None:
        """Close every idle session (QUIT best effort); slots in use close their own."""
        self._closed = True
        idle, self._idle = self._idle, []
        await asyncio.gather(*(quit_channel(s.channel) for s in idle))

    async def _session(self) -> _Session:
        """A kept session that answers RSET, else a freshly opened one."""
        while self._idle:
            session = self._idle.pop()  # the most recently used is the likeliest alive
            if time.monotonic() - session.idle_since > self._idle_limit_s:
                await quit_channel(session.channel)
                continue
            try:
                await session.channel.command(
                    b"RSET", stage="connection", reason="connect_failed", expect=(250,)
                )
            except NotSent:
                session.channel.abort()
                continue
            return session
        return _Session(await open_session(self._settings))

    async def _keep(self, session: _Session) -> None:
        session.messages += 1
        if self._closed or session.messages >= self._messages_per_session:
            await quit_channel(session.channel)
            return
        session.idle_since = time.monotonic()
        self._idle.append(session)


class PooledSlot:
    """One slot of the pool: begins submissions on a kept or fresh session."""

    def __init__(self, pool: SmtpPool) -> None:
        self._pool = pool
        self._active: _Session | None = None

    async def begin(self, envelope: Envelope, raw: bytes) -> SmtpSubmission:
        """Run every step before the end-of-data marker; NotSent on any failure."""
        check_submittable(envelope, raw)
        session = await self._pool._session()
        self._active = session

        async def keep(channel: Channel) -> None:
            self._active = None
            await self._pool._keep(session)

        return await transact(session.channel, envelope, raw, self._pool._settings, keep)

    def drop(self) -> None:
        """Close a session the slot still holds (its submission never ended in acceptance)."""
        session, self._active = self._active, None
        if session is not None:
            session.channel.abort()
