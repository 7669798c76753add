"""Spread the `verify` scan over the machine's cores: forked processes check the streams.

The parent lists the streams and forks one child per contiguous run of the sorted pids. While
the children read and check their streams (audit_scan.scan_streams), the parent reads the index
and sends each child the digests of its pids' index entries; each child sends back a compact
ScanResult, and the parent folds them in pid order (merge_scan), which keeps today's order of
findings. Nothing large crosses the fork or a pipe, and a child ends without freeing what it
read. Where fork is unavailable, or the ledger is small, the scan runs in this process.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Final

import redis.asyncio as aioredis

from ledger.audit import AuditRules
from ledger.audit_read import STREAM_BATCH
from ledger.audit_scan import IndexDigests, Progress, ScanResult, scan_streams
from ledger.keys import LedgerKeys
from schemas.errors import MailError
from schemas.ledger import LedgerCorrupt, LedgerUnavailable

MAX_WORKERS: Final = 8
MIN_SHARD_STREAMS: Final = 8 * STREAM_BATCH  # below this per process, a fork costs more
_POLL_S: Final = 0.01


def default_workers(streams: int) -> int:
    """How many processes to check `streams` streams with: one per usable core, if worth it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1, streams // MIN_SHARD_STREAMS))


def shard_bounds(count: int, shards: int) -> list[tuple[int, int]]:
    """Cut `count` sorted pids into `shards` contiguous runs of about equal length."""
    edges = [count * n // shards for n in range(shards + 1)]
    return list(itertools.pairwise(edges))


class Shards:
    """Stream checks running in forked children (or, with one shard, later in this process)."""

    def __init__(
        self,
        client: aioredis.Redis,
        keys: LedgerKeys,
        pids: Sequence[str],
        rules: AuditRules,
        digest_key: bytes,
        workers: int,
    ) -> None:
        self.client, self.keys, self.pids = client, keys, pids
        self.rules, self.digest_key = rules, digest_key
        self.bounds = shard_bounds(len(pids), max(1, workers))
        self._digests: dict[bytes, bytes] = {}
        self._senders: list[threading.Thread] = []
        self._pipes: list[Connection] = []
        self._children: list[multiprocessing.process.BaseProcess] = []
        if len(self.bounds) > 1 and "fork" in multiprocessing.get_all_start_methods():
            self._start()
        else:
            self.bounds = [(0, len(pids))]

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        for start, end in self.bounds:
            here, there = context.Pipe()
            child = context.Process(
                target=_child,
                args=(self.client.connection_pool, self.keys, self.pids[start:end], self, there),
                daemon=True,
            )
            child.start()
            there.close()
            self._pipes.append(here)
            self._children.append(child)

    def send_digests(self, digests: dict[bytes, bytes]) -> None:
        """Hand each shard the index digests of its pids (audit_scan.index_digests)."""
        if not self._children:
            self._digests = digests
            return
        for (start, end), pipe in zip(self.bounds, self._pipes, strict=True):
            # A thread sends: a child blocks on its progress messages until `results` reads
            # them, so a send larger than the pipe's buffer must not hold up this loop.
            aligned = _aligned(self.pids[start:end], digests)
            sender = threading.Thread(target=pipe.send, args=(aligned,), daemon=True)
            sender.start()
            self._senders.append(sender)

    async def results(self, progress: Progress | None = None) -> list[ScanResult]:
        """Wait for every shard's ScanResult, in pid order."""
        if not self._children:

            async def digests() -> list[bytes | None]:
                return _aligned(self.pids, self._digests)

            scan = scan_streams(
                self.client, self.keys, self.pids, self.rules, self.digest_key, digests, progress
            )
            return [await scan]
        try:
            return await _collect(self._pipes, self._children, progress)
        finally:
            self.close()

    def close(self) -> None:
        """Stop any child still running and release the pipes."""
        for started in self._children:
            if started.is_alive():
                started.terminate()
            started.join()
        for sender in self._senders:  # a dead child's pipe fails the send: it ends too
            sender.join()
        for pipe in self._pipes:
            pipe.close()
        self._children, self._pipes, self._senders = [], [], []


async def _collect(
    pipes: Sequence[Connection],
    children: Sequence[multiprocessing.process.BaseProcess],
    progress: Progress | None,
) -> list[ScanResult]:
    results: list[ScanResult | None] = [None] * len(pipes)
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


def _aligned(pids: Sequence[str], digests: dict[bytes, bytes]) -> list[bytes | None]:
    return [digests.get(pid.encode("latin-1")) for pid in pids]


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
    shards: Shards,
    pipe: Connection,
) -> None:
    """Check one shard's streams in a forked process and send the result (or what stopped it)."""

    def report(streams: int, events: int) -> None:
        pipe.send(("progress", streams, events))

    async def digests() -> list[bytes | None]:
        # Asked for once every stream is checked; the parent has sent them by then, or soon.
        aligned: list[bytes | None] = pipe.recv()
        return aligned

    try:
        result = asyncio.run(_scan_child(pool, keys, pids, shards, digests, report))
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


async def _scan_child(
    pool: aioredis.ConnectionPool,
    keys: LedgerKeys,
    pids: Sequence[str],
    shards: Shards,
    digests: IndexDigests,
    progress: Progress,
) -> ScanResult:
    # Never touch the parent's connections: a fresh pool with the same settings.
    own = aioredis.ConnectionPool(
        connection_class=pool.connection_class, max_connections=4, **pool.connection_kwargs
    )
    client = aioredis.Redis(connection_pool=own)
    try:
        return await scan_streams(
            client, keys, pids, shards.rules, shards.digest_key, digests, progress
        )
    finally:
        await client.aclose()
        await own.disconnect()
