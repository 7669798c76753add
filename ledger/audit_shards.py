"""Spread the `verify` scan over the machine's cores: one forked process per range of pids.

Shard k owns the pids (stream keys and index entries alike) in one range of the byte order,
cut on the hex alphabet. Each child opens its own Redis connection, reads the index keeping its
range, gets its sorted pids from the parent (which lists the streams meanwhile), scans them and
sends back its ShardResult; the parent merges the shards in range order, which is today's order
of findings. Nothing large is shared, so no page is copied on write, and a child ends without
freeing what it read. Where fork is unavailable, or the ledger is small, one shard runs here.
"""

from __future__ import annotations

import asyncio
import bisect
import multiprocessing
import os
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing.connection import Connection
from typing import Final

import redis.asyncio as aioredis

from ledger.audit import AuditRules
from ledger.audit_scan import Progress, ShardResult, verify_shard
from ledger.keys import LedgerKeys
from schemas.errors import MailError
from schemas.ledger import LedgerCorrupt, LedgerUnavailable

MAX_WORKERS: Final = 8
MIN_SHARD_EVENTS: Final = 20_000  # below this per process, a fork costs more than it saves
_POLL_S: Final = 0.01

PidLister = Callable[[], Awaitable[list[str]]]  # the sorted pids of every stream


def default_workers(events: int) -> int:
    """How many processes to verify about `events` events with: one per core, if worth it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1, events // MIN_SHARD_EVENTS))


def boundaries(count: int) -> list[str]:
    """Cut the pid space into `count` ranges of about equal share of random hex pids."""
    return [f"{256 * k // count:02x}" for k in range(1, count)]


async def verify_all(
    client: aioredis.Redis,
    keys: LedgerKeys,
    rules: AuditRules,
    list_pids: PidLister,
    workers: int,
    progress: Progress | None = None,
) -> list[ShardResult]:
    """Verify in `workers` shards; return their results in pid order."""
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        listing = asyncio.ensure_future(list_pids())  # SCAN while the index is read
        try:
            return [await verify_shard(client, keys, rules, listing, progress=progress)]
        finally:
            listing.cancel()
    cuts = boundaries(workers)
    lows = [b"", *(cut.encode() for cut in cuts)]
    highs: list[bytes | None] = [*(cut.encode() for cut in cuts), None]
    context = multiprocessing.get_context("fork")
    pipes: list[Connection] = []
    children: list[multiprocessing.process.BaseProcess] = []
    try:
        for low, high in zip(lows, highs, strict=True):
            here, there = context.Pipe()
            child = context.Process(
                target=_child,
                args=(client.connection_pool, keys, rules, low, high, there),
                daemon=True,
            )
            child.start()
            there.close()
            pipes.append(here)
            children.append(child)
        pids = await list_pids()
        edges = [0, *(bisect.bisect_left(pids, cut) for cut in cuts), len(pids)]
        for n, pipe in enumerate(pipes):
            pipe.send(pids[edges[n] : edges[n + 1]])
        return await _collect(pipes, children, progress)
    finally:
        for started in children:
            if started.is_alive():
                started.terminate()
            started.join()
        for pipe in pipes:
            pipe.close()


async def _collect(
    pipes: Sequence[Connection],
    children: Sequence[multiprocessing.process.BaseProcess],
    progress: Progress | None,
) -> list[ShardResult]:
    results: list[ShardResult | None] = [None] * len(pipes)
    done = [(0, 0)] * len(pipes)
    while any(result is None for result in results):
        for n, pipe in enumerate(pipes):
            while results[n] is None and pipe.poll():
                try:
                    message = pipe.recv()
                except EOFError:
                    raise RuntimeError("a verify worker ended without its result") from None
                if message[0] == "progress":
                    done[n] = (message[1], message[2])
                    if progress is not None:
                        progress(sum(s for s, _ in done), sum(e for _, e in done))
                elif message[0] == "done":
                    results[n] = message[1]
                else:
                    raise _failure(message)
            if results[n] is None and not children[n].is_alive() and not pipe.poll():
                raise RuntimeError("a verify worker ended without its result")
        if any(result is None for result in results):
            await asyncio.sleep(_POLL_S)
    return [result for result in results if result is not None]


def _failure(message: tuple[str, ...]) -> Exception:
    if message[0] == "unavailable":
        return LedgerUnavailable(maybe_applied=False)
    if message[0] == "failed":
        return LedgerCorrupt(message[1])
    return RuntimeError(f"a verify worker failed ({message[1]})")


def _child(
    pool: aioredis.ConnectionPool,
    keys: LedgerKeys,
    rules: AuditRules,
    low: bytes,
    high: bytes | None,
    pipe: Connection,
) -> None:
    """Run one shard in a forked process and send its result (or what stopped it) back."""

    def report(streams: int, events: int) -> None:
        pipe.send(("progress", streams, events))

    async def from_parent() -> list[str]:
        pids: list[str] = pipe.recv()  # awaited only once the index is read: blocking is fine
        return pids

    try:
        result = asyncio.run(_verify_child(pool, keys, rules, low, high, from_parent(), report))
    except LedgerUnavailable:
        pipe.send(("unavailable",))
    except MailError as exc:  # the message is ours: it names checks, never stored content
        pipe.send(("failed", exc.message))
    except Exception as exc:
        pipe.send(("crashed", type(exc).__name__))
    else:
        pipe.send(("done", result))
    finally:
        pipe.close()


async def _verify_child(
    pool: aioredis.ConnectionPool,
    keys: LedgerKeys,
    rules: AuditRules,
    low: bytes,
    high: bytes | None,
    pids: Awaitable[list[str]],
    progress: Progress,
) -> ShardResult:
    # Never touch the parent's connections: a fresh pool with the same settings.
    own = aioredis.ConnectionPool(
        connection_class=pool.connection_class, max_connections=4, **pool.connection_kwargs
    )
    client = aioredis.Redis(connection_pool=own)
    try:
        return await verify_shard(client, keys, rules, pids, low, high, progress)
    finally:
        await client.aclose()
        await own.disconnect()
