"""Auditor runs over Redis or an export file: verify, list, export and replay.

Reads only. Streams are read in batches through BulkReader, the next batch in flight while the
current one is checked, so Redis and Python work side by side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Final

from ledger.audit.checks import (
    AuditRules,
    Finding,
    StreamAudit,
    audit_stream,
    group_index,
    index_findings,
    missing_stream_findings,
    with_findings,
)
from ledger.audit.summary import LedgerAudit
from ledger.store.bulk import STREAM_BATCH, BulkReader, IndexEntry, StoredEntry
from schemas.ledger import LedgerEntry

Progress = Callable[[int, int], None]  # (streams done, events done)
_PID_CHARS: Final = frozenset("0123456789abcdef")
_INDEX_LEEWAY_MS: Final = 1_000  # an index entry is made in the same script as its event


def items_are_pid(pid: str) -> bool:
    """Tell whether a text is a prepared_id (32 lowercase hex)."""
    return len(pid) == 32 and set(pid) <= _PID_CHARS


async def verify_ledger(
    reader: BulkReader,
    rules: AuditRules,
    *,
    progress: Progress | None = None,
    keep_steps: bool = False,
) -> LedgerAudit:
    """Verify every stream of the namespace and the index against them."""
    started = time.perf_counter()
    summary = LedgerAudit(keep_steps=keep_steps)
    index = await reader.index()
    summary.index_entries = len(index)
    by_pid = group_index(index)
    del index
    listed = sorted(set(await reader.stream_pids()))
    pids = [pid for pid in listed if items_are_pid(pid)]
    async for batch_pids, groups in batches(reader, pids):
        for pid, stored in zip(batch_pids, groups, strict=True):
            entries = [item.entry for item in stored]
            summary.add(_check(pid, stored, entries, by_pid.pop(pid, []), rules), entries)
        if progress is not None:
            progress(summary.streams, summary.events)
    summary.findings += [
        Finding(key[:64], 0, "stream_malformed", "a stream key of the ledger names no pid")
        for key in listed
        if not items_are_pid(key)
    ]
    for pid, indexed in sorted(by_pid.items()):
        if not items_are_pid(pid):
            summary.findings.append(Finding(pid[:64], 0, "index_malformed", "index names no pid"))
            continue
        summary.findings += missing_stream_findings(pid, indexed, rules)
    summary.elapsed_s = time.perf_counter() - started
    return summary


def _check(
    pid: str,
    stored: Sequence[StoredEntry],
    entries: Sequence[LedgerEntry],
    indexed: Sequence[IndexEntry],
    rules: AuditRules,
) -> StreamAudit:
    """Audit one stream (`entries` are the entries of `stored`), then hold it against its index."""
    extra = [
        Finding(pid, position, "missing_field", "lacks " + ",".join(item.lacking))
        for position, item in enumerate(stored, start=1)
        if item.lacking
    ]
    extra += index_findings(pid, entries, indexed, rules)
    return with_findings(audit_stream(pid, entries, rules), extra)


async def batches(
    reader: BulkReader, pids: Sequence[str]
) -> AsyncIterator[tuple[Sequence[str], list[list[StoredEntry]]]]:
    """Yield (pids, stored streams) batch by batch, reading the next batch meanwhile."""
    chunks = [pids[start : start + STREAM_BATCH] for start in range(0, len(pids), STREAM_BATCH)]
    if not chunks:
        return
    pending = asyncio.ensure_future(reader.streams(chunks[0]))
    for position, chunk in enumerate(chunks):
        _, groups = await pending
        if position + 1 < len(chunks):
            pending = asyncio.ensure_future(reader.streams(chunks[position + 1]))
        yield chunk, groups


async def audit_pids(
    reader: BulkReader, pids: Sequence[str], rules: AuditRules
) -> list[tuple[StreamAudit, list[LedgerEntry]]]:
    """Audit the named streams, each held against its index entries; for `show` and `list`.

    The index is read from the oldest event among the streams on, so a stream whose newest
    entries were deleted or rewritten is caught here too, not only by `verify`.
    """
    found: list[tuple[str, list[StoredEntry]]] = []
    async for batch_pids, groups in batches(reader, pids):
        found += [(pid, stored) for pid, stored in zip(batch_pids, groups, strict=True) if stored]
    oldest = min((stored[0].entry.srv_ms for _, stored in found), default=0)
    by_pid = group_index(await reader.index(since_ms=max(0, oldest - _INDEX_LEEWAY_MS)))
    audits = []
    for pid, stored in found:
        entries = [item.entry for item in stored]
        audits.append((_check(pid, stored, entries, by_pid.get(pid, []), rules), entries))
    return audits


async def recent_pids(reader: BulkReader, since_ms: int, until_ms: int | None = None) -> list[str]:
    """Return the pids with any ledger event between two times (inclusive), by the index."""
    seen: dict[str, None] = {}
    for item in await reader.index(since_ms=since_ms, until_ms=until_ms):
        if items_are_pid(item.pid):
            seen.setdefault(item.pid, None)
    return list(seen)
