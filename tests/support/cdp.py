"""A small Chrome DevTools Protocol client over an aiohttp websocket, with flat sessions."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import aiohttp
import msgspec

# Screenshots arrive base64-encoded in one message; the default 4 MiB cap is too small.
MAX_MESSAGE = 64 * 1024 * 1024


class BrowserError(RuntimeError):
    """The browser refused a command, went away, or did not answer in time."""


class _Error(msgspec.Struct):
    message: str
    code: int = 0
    data: str | None = None


class _Message(msgspec.Struct, rename={"session_id": "sessionId"}):
    id: int | None = None
    result: dict[str, Any] | None = None
    error: _Error | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    session_id: str | None = None


_Key = tuple[str | None, str]  # (session id, event method)


class Connection:
    """One websocket to the browser endpoint; commands are routed to sessions by id."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        describe: Callable[[], str],
        command_timeout: float = 30.0,
    ) -> None:
        self._ws = ws
        self._command_timeout = command_timeout
        self._describe = describe  # what to add to an error when the browser is gone
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._waiters: dict[_Key, list[asyncio.Future[dict[str, Any]]]] = {}
        self._listeners: dict[_Key, list[Callable[[dict[str, Any]], None]]] = {}
        self._closed: BrowserError | None = None
        self._reader = asyncio.create_task(self._read())

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
    ) -> dict[str, Any]:
        """Send one command and return its result, raising BrowserError on an error answer."""
        if self._closed is not None:
            raise self._closed
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        try:
            # DevTools closes the socket on a binary frame: commands go as text.
            await self._ws.send_str(msgspec.json.encode(message).decode())
            async with asyncio.timeout(self._command_timeout):
                return await future
        except TimeoutError:
            raise BrowserError(f"{method}: no answer within {self._command_timeout} s") from None
        finally:
            self._pending.pop(ident, None)

    def expect(self, method: str, *, session: str | None = None) -> asyncio.Future[dict[str, Any]]:
        """A future for the next `method` event on `session`; create it before the trigger."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self._closed is not None:
            future.set_exception(self._closed)
        else:
            self._waiters.setdefault((session, method), []).append(future)
        return future

    def listen(
        self, method: str, callback: Callable[[dict[str, Any]], None], *, session: str | None
    ) -> None:
        """Call `callback(params)` for every `method` event on `session`."""
        self._listeners.setdefault((session, method), []).append(callback)

    async def close(self) -> None:
        """Close the websocket and stop reading."""
        await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader

    async def _read(self) -> None:
        reason = "the DevTools websocket closed"
        try:
            async for frame in self._ws:
                if frame.type is not aiohttp.WSMsgType.TEXT:
                    break
                self._dispatch(msgspec.json.decode(frame.data, type=_Message))
        except Exception as exc:  # the reader must always fail the waiters below
            reason = f"reading from DevTools failed: {exc!r}"
        self._closed = BrowserError(f"{reason}\n{self._describe()}")
        for future in [*self._pending.values(), *itertools.chain(*self._waiters.values())]:
            if not future.done():
                future.set_exception(self._closed)
        self._waiters.clear()

    def _dispatch(self, message: _Message) -> None:
        if message.id is not None:
            future = self._pending.get(message.id)
            if future is None or future.done():
                return
            if message.error is not None:
                detail = f" ({message.error.data})" if message.error.data else ""
                future.set_exception(BrowserError(f"{message.error.message}{detail}"))
            else:
                future.set_result(message.result or {})
            return
        if message.method is None:
            return
        key = (message.session_id, message.method)
        params = message.params or {}
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(params)
        for callback in self._listeners.get(key, []):
            callback(params)
