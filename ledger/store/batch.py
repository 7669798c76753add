"""Runs the ledger scripts by EVALSHA, reloading them on NOSCRIPT, optionally in batches.

A single call is the script's redis-py AsyncScript (ledger/store/lua_scripts.py), which loads the
script when Redis answers NOSCRIPT. A batch writes its EVALSHAs itself, with the same SHAs, and
answers a NOSCRIPT reply in it by that single call.

Batching is group commit for independent sends: script calls issued by concurrent tasks in the
same event-loop turn leave as pipelines of at most MAX_BATCH calls (shared round trips, shared
fsyncs on the server). Each EVALSHA stays atomic on its own and each caller still gets its own
reply, so semantics are those of separate calls; only the round trips are shared. A call whose
caller was cancelled before its pipeline left is dropped, as an unbatched call would never have
been sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from ledger.store.lua_scripts import Arg
from ledger.store.scripts import SCRIPTS
from ledger.store.wire import exchange

# Small pipelines, several per loop turn: while Redis runs one, this process packs the next and
# parses the last, so both cores work (bench/ledger_core.py: one pipeline of 256 calls leaves
# them taking turns, ~2,300 lifecycles/s; pipelines of 8 reach 3,800-5,050 on 2 vCPUs, where 16
# and 32 measured no better and 4 worse).
MAX_BATCH: Final = 8
_Call = tuple[str, Sequence[str], Sequence[Arg], "asyncio.Future[Any]"]


class ScriptRunner:
    """EVALSHA with automatic reload; `batching` coalesces calls of one loop turn."""

    def __init__(self, client: aioredis.Redis, *, batching: bool = False) -> None:
        self._client = client
        self._scripts = SCRIPTS.register(client)
        self._batching = batching
        self._pending: list[_Call] = []
        self._scheduled = False
        self._flushes: set[asyncio.Task[None]] = set()

    async def run(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run one script and return its raw reply (redis-py exceptions pass through)."""
        if not self._batching:
            return await self._single(name, keys, args)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((name, keys, args, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._start_flush)
        return await future

    def _start_flush(self) -> None:
        self._scheduled = False
        pending = [call for call in self._pending if not call[3].done()]
        self._pending = []
        for start in range(0, len(pending), MAX_BATCH):
            task = asyncio.get_running_loop().create_task(
                self._flush(pending[start : start + MAX_BATCH])
            )
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def _flush(self, batch: list[_Call]) -> None:
        try:
            replies = await self._send(batch)
        except BaseException as exc:  # the whole round trip failed: every caller learns it
            for *_, future in batch:
                _fail(future, exc)
            return
        for (name, keys, args, future), reply in zip(batch, replies, strict=True):
            if isinstance(reply, NoScriptError):
                try:
                    reply = await self._single(name, keys, args)
                except BaseException as exc:
                    _fail(future, exc)
                    continue
            if isinstance(reply, BaseException):
                _fail(future, reply)
            else:
                _settle(future, reply)

    async def _send(self, batch: list[_Call]) -> list[Any]:
        """Write the batch's EVALSHAs in one send on one pooled connection and read each reply."""
        pool = self._client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            return await exchange(
                connection,
                (("EVALSHA", self._scripts[name].sha, len(keys), *keys, *args)
                 for name, keys, args, _ in batch),
            )  # fmt: skip
        finally:
            await pool.release(connection)

    async def _single(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        return await self._scripts[name](keys, args)


def _settle(future: asyncio.Future[Any], reply: Any) -> None:
    if not future.done():
        future.set_result(reply)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
