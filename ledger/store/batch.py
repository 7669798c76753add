"""Runs the ledger scripts by EVALSHA on a connection it holds, optionally in batches.

Every call goes out through wire.exchange on a connection to the node that serves the ledger's
keys (ledger/store/nodes.py), so that the confirmation a write needs (a `WAIT` for replicas,
a `WAITAOF` for the fsync: durability/acks.py) runs on the connection that wrote it. A NOSCRIPT
reply loads the script on that connection and sends the call again; a cluster's MOVED, ASK,
TRYAGAIN or CLUSTERDOWN reply reads the topology again first. Each of those replies means the
script did not run, so sending it again cannot apply it twice.

Batching is group commit for independent sends: script calls issued by concurrent tasks in the
same event-loop turn leave as pipelines of at most MAX_BATCH calls (shared round trips, shared
fsyncs and one shared `WAIT` on the server). Each EVALSHA stays atomic on its own and each
caller still gets its own reply, so semantics are those of separate calls; only the round trips
are shared. A call whose caller was cancelled before its pipeline left is dropped, as an
unbatched call would never have been sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

from redis.exceptions import ClusterDownError, NoScriptError

from ledger.store.connection import StoreClient
from ledger.store.durability.acks import NONE, Acknowledgment
from ledger.store.lua_scripts import Arg
from ledger.store.nodes import NOT_RUN_HERE, borrowed, rediscover
from ledger.store.scripts import SCRIPTS
from ledger.store.wire import Command, exchange

# Small pipelines, several per loop turn: while Redis runs one, this process packs the next and
# parses the last, so both cores work (bench/ledger_core.py: one pipeline of 256 calls leaves
# them taking turns, ~2,300 lifecycles/s; pipelines of 8 reach 3,800-5,050 on 2 vCPUs, where 16
# and 32 measured no better and 4 worse).
MAX_BATCH: Final = 8
MAX_ROUNDS: Final = 4  # sends of one call that was not run (NOSCRIPT, a moving cluster)
Replied = tuple[Any, bool]  # a script's raw reply, and whether its acknowledgment confirmed it
_Call = tuple[str, Sequence[str], Sequence[Arg], "asyncio.Future[Replied]"]


class ScriptRunner:
    """EVALSHA with automatic reload and acknowledgment; `batching` coalesces calls of one
    loop turn."""

    def __init__(self, client: StoreClient, *, batching: bool = False) -> None:
        self._client = client
        self._shas = {name: SCRIPTS.sha(name) for name in SCRIPTS.names}
        self._batching = batching
        self.ack: Acknowledgment = NONE
        self._pending: list[_Call] = []
        self._scheduled = False
        self._flushes: set[asyncio.Task[None]] = set()

    async def run(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> Replied:
        """Run one script; return its raw reply (redis-py exceptions pass through) and whether
        the required acknowledgment confirmed it (always True when none is required)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Replied] = loop.create_future()
        call = (name, keys, args, future)
        if not self._batching:
            await self._flush([call])
            return await future
        self._pending.append(call)
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
            await self._rounds(batch)
        except BaseException as exc:  # a round trip failed: every caller not answered learns it
            for *_, future in batch:
                _fail(future, exc)

    async def _rounds(self, batch: list[_Call]) -> None:
        ack = self.ack
        for _ in range(MAX_ROUNDS):
            replies, confirmed = await self._send(batch, ack)
            again: list[_Call] = []
            for call, reply in zip(batch, replies, strict=True):
                if isinstance(reply, (NoScriptError, *NOT_RUN_HERE)):
                    again.append(call)
                elif isinstance(reply, BaseException):
                    _fail(call[3], reply)
                else:
                    _settle(call[3], (reply, confirmed))
            if not again:
                return
            if any(isinstance(reply, NOT_RUN_HERE) for reply in replies):
                await rediscover(self._client)
            batch = again
        for call in batch:  # still not run: the store keeps refusing, so say so
            _fail(call[3], ClusterDownError("the ledger store kept redirecting a script"))

    async def _send(self, batch: list[_Call], ack: Acknowledgment) -> tuple[list[Any], bool]:
        """Write the batch's EVALSHAs (and the acknowledgment) in one send on one connection."""
        commands: list[Command] = []
        for name, keys, args, _ in batch:
            commands.append(("EVALSHA", self._shas[name], len(keys), *keys, *args))
        if ack.required:
            commands.append(ack.command())
        async with borrowed(self._client, batch[0][1][0]) as connection:
            replies = await exchange(connection, commands)
            missing = {
                name
                for (name, *_), reply in zip(batch, replies, strict=False)
                if isinstance(reply, NoScriptError)
            }
            if missing:
                await exchange(
                    connection, [("SCRIPT", "LOAD", SCRIPTS.source(name)) for name in missing]
                )
        if not ack.required:
            return replies, True
        return replies[:-1], ack.confirms(replies[-1])


def _settle(future: asyncio.Future[Replied], reply: Replied) -> None:
    if not future.done():
        future.set_result(reply)


def _fail(future: asyncio.Future[Replied], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
