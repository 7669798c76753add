"""The machinery under an IMAP session: one command at a time, under a lock and a timeout.

A command that times out, is cancelled, or loses its connection leaves the channel unusable
(`usable` is False): the pool then discards it instead of guessing what the server did.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aioimaplib import aioimaplib as _aio

from providers.imap.codec import Arg
from providers.imap.responses import ImapResponse, SelectResult
from providers.imap.wire import FetchReply, WireProtocol
from schemas.errors import OutcomeUnknown, SafetyLimit, ServiceUnavailable

T = TypeVar("T")


class ImapChannel:
    """A connected IMAP protocol with its lock, timeout, capabilities and broken flag."""

    def __init__(self, transport: asyncio.Transport, wire: WireProtocol, timeout_s: float):
        self._transport = transport
        self._wire = wire
        self._timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._broken = False
        self._literal_max = 0
        self.capabilities: frozenset[str] = frozenset()
        self.capability_atoms: tuple[str, ...] = ()
        self.selected: SelectResult | None = None
        self.selected_name: str | None = None
        self.last_used = time.monotonic()

    @property
    def usable(self) -> bool:
        """Tell whether the connection is open and in a known state."""
        return not (self._broken or self._wire.closed.done())

    def _set_capabilities(self, atoms: Sequence[str]) -> None:
        self.capability_atoms = tuple(atoms)
        self.capabilities = frozenset(a.upper() for a in atoms)
        if "LITERAL+" in self.capabilities:
            self._literal_max = 2**31
        elif "LITERAL-" in self.capabilities:
            self._literal_max = 4096
        else:
            self._literal_max = 0

    async def close(self) -> None:
        """Close the connection without LOGOUT and wait briefly until it is gone."""
        self._broken = True
        self._wire.state = _aio.LOGOUT
        self._transport.abort()
        try:
            async with asyncio.timeout(1.0):
                await asyncio.shield(self._wire.closed)
        except TimeoutError:
            pass

    def _break(self) -> None:
        self._broken = True
        self._transport.abort()

    def _make(
        self,
        name: str,
        args: Sequence[Arg],
        *,
        prefix: str | None = None,
        untagged: str | None = None,
    ) -> Any:
        tag = self._wire.new_tag()
        loop = self._wire.loop
        # Non-synchronizing literals carry CRLF by design; aioimaplib's constructor rejects any
        # CR/LF, so hand it placeholders and restore the checked arguments afterwards.
        safe = ["L" if "\r\n" in a else a for a in args]
        if name == "FETCH":
            command = FetchReply(tag, *safe, prefix=prefix, loop=loop)
        else:
            command = _aio.Command(
                name, tag, *safe, prefix=prefix, untagged_resp_name=untagged, loop=loop
            )
        command.args = tuple(args)
        return command

    async def _run(
        self, command: Any, *, scrub: str | None = None, mutating: bool = False
    ) -> ImapResponse:
        reply = await self._guarded(
            lambda: self._wire.execute(command, scrub=scrub), command.name, mutating
        )
        return as_response(reply)

    async def _guarded(self, exchange: Callable[[], Awaitable[T]], name: str, mutating: bool) -> T:
        """Await one exchange under the lock and timeout; any doubt leaves the session broken."""
        if not self.usable:
            raise ServiceUnavailable("the IMAP connection is closed")
        async with self._lock:
            task = asyncio.ensure_future(exchange())
            waiting: set[asyncio.Future[Any]] = {task, self._wire.closed}
            try:
                done, _ = await asyncio.wait(
                    waiting,
                    timeout=self._timeout_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            except asyncio.CancelledError:
                task.cancel()
                self._break()  # the reply may still arrive: the state is unknown
                raise
            self.last_used = time.monotonic()
            if task in done and task.exception() is None:
                return task.result()
            if task in done:
                self._break()  # aioimaplib refused or lost track of the command
                raise ServiceUnavailable(f"the IMAP session failed during {name}")
            task.cancel()
            self._break()
            if self._wire.over_budget:
                raise SafetyLimit()
            if mutating:
                raise OutcomeUnknown(f"no reply to {name}; the change may have happened")
            if self._wire.closed.done():
                raise ServiceUnavailable("the IMAP connection was lost")
            raise ServiceUnavailable("the IMAP server did not answer in time")


def as_response(reply: Any) -> ImapResponse:
    """Turn aioimaplib's Response into ours: untagged entries, then the tagged line's text."""
    entries = [bytes(line) for line in reply.lines]
    text = entries.pop() if entries else b""
    return ImapResponse(status=str(reply.result), text=text, lines=entries)
