"""Spread the `verify` scan over the machine's cores: one forked process per shard of pids.

The index is read and grouped once, before the fork, so every child sees it without copying
it through a pipe. Each child opens its own Redis connection, scans its contiguous run of the
sorted pids, and sends back its partial summary; the parent merges them in shard order, which
keeps today's order of findings. Where fork is unavailable, or the ledger is small, the scan
runs in this process.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Final

import redis.asyncio as aioredis

from ledger.audit import AuditRules, LedgerAudit
from ledger.audit_fast import Entry
from ledger.audit_read import STREAM_BATCH
from ledger.audit_scan import Progress, scan_shard
from ledger.keys import LedgerKeys
from schemas.errors import MailError
from schemas.ledger import LedgerCorrupt, LedgerUnavailable

MAX_WORKERS: Final = 8
MIN_SHARD_STREAMS: Final = 4 * STREAM_BATCH  # below this a fork costs more than it saves
_POLL_S: Final = 0.01


def default_workers(streams: int) -> int:
    """How many processes to scan `streams` streams with: one per usable core, if worth it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1, streams // MIN_SHARD_STREAMS))


async def scan_all(
    client: aioredis.Redis,
    keys: LedgerKeys,
    pids: Sequence[str],
    by_pid: Mapping[bytes, list[Entry]],
    rules: AuditRules,
    progress: Progress | None = None,
    workers: int | None = None,
) -> list[LedgerAudit]:
    """Scan the sorted `pids` in shards; return their partial summaries in pid order."""
    count = default_workers(len(pids)) if workers is None else max(1, min(workers, len(pids)))
    if count == 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [await scan_shard(client, keys, pids, by_pid, rules, progress)]
    bounds = [len(pids) * n // count for n in range(count + 1)]
    context = multiprocessing.get_context("fork")
    pipes: list[Connection] = []
    children: list[multiprocessing.process.BaseProcess] = []
    try:
        for start, end in itertools.pairwise(bounds):
            here, there = context.Pipe(duplex=False)
            child = context.Process(
                target=_child,
                args=(client.connection_pool, keys, pids[start:end], by_pid, rules, there),
                daemon=True,
            )
            child.start()
            there.close()
            pipes.append(here)
            children.append(child)
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
) -> list[LedgerAudit]:
    results: list[LedgerAudit | None] = [None] * len(pipes)
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
    pids: Sequence[str],
    by_pid: Mapping[bytes, list[Entry]],
    rules: AuditRules,
    out: Connection,
) -> None:
    """Run one shard in a forked process and send its summary (or what stopped it) back."""

    def report(streams: int, events: int) -> None:
        out.send(("progress", streams, events))

    try:
        summary = asyncio.run(_scan_child(pool, keys, pids, by_pid, rules, report))
    except LedgerUnavailable:
        out.send(("unavailable",))
    except MailError as exc:  # the message is ours: it names checks, never stored content
        out.send(("failed", exc.message))
    except Exception as exc:
        out.send(("crashed", type(exc).__name__))
    else:
        out.send(("done", summary))
    finally:
        out.close()


async def _scan_child(
    pool: aioredis.ConnectionPool,
    keys: LedgerKeys,
    pids: Sequence[str],
    by_pid: Mapping[bytes, list[Entry]],
    rules: AuditRules,
    progress: Progress,
) -> LedgerAudit:
    # Never touch the parent's connections: a fresh pool with the same settings.
    own = aioredis.ConnectionPool(
        connection_class=pool.connection_class, max_connections=4, **pool.connection_kwargs
    )
    client = aioredis.Redis(connection_pool=own)
    try:
        return await scan_shard(client, keys, pids, by_pid, rules, progress)
    finally:
        await client.aclose()
        await own.disconnect()
