"""Auditor runs over Redis or an export file: verify, list, export and replay (§8.13).

Reads only. Streams are read in batches through BulkReader, the next batch in flight while the
current one is checked, so Redis and Python work side by side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Final

import msgspec
from msgspec import Struct

from ledger.audit import (
    AuditRules,
    Finding,
    LedgerAudit,
    StreamAudit,
    audit_stream,
    group_index,
    index_findings,
    missing_stream_findings,
)
from ledger.audit_read import STREAM_BATCH, BulkReader, IndexEntry, StoredEntry
from ledger.chain import mac_key_id
from schemas.ledger import LedgerEntry

Progress = Callable[[int, int], None]  # (streams done, events done)
_PID_CHARS: Final = frozenset("0123456789abcdef")


class MissingStream(Struct, frozen=True, kw_only=True):
    """An export line for an index entry whose stream (or entry) Redis no longer has."""

    pid: str
    seq: int
    t: str
    h: str
    index_id: str
    missing_stream: bool = True


def items_are_pid(pid: str) -> bool:
    """Tell whether a text is a prepared_id (32 lowercase hex)."""
    return len(pid) == 32 and set(pid) <= _PID_CHARS


async def verify_ledger(
    reader: BulkReader,
    rules: AuditRules,
    *,
    meta_key_id: str = "",
    progress: Progress | None = None,
) -> LedgerAudit:
    """Verify every stream of the namespace and the index against them (§8.13 items 1-12)."""
    started = time.perf_counter()
    summary = LedgerAudit()
    if rules.key is not None and meta_key_id and meta_key_id != mac_key_id(rules.key):
        summary.findings.append(
            Finding("", 0, "mac_key_mismatch", "the ledger was sealed with another HMAC key")
        )
    index = await reader.index()
    summary.index_entries = len(index)
    by_pid = group_index(index)
    del index
    listed = sorted(set(await reader.stream_pids()))
    pids = [pid for pid in listed if items_are_pid(pid)]
    async for batch_pids, groups in _batches(reader, pids):
        for pid, stored in zip(batch_pids, groups, strict=True):
            summary.add(*_check(pid, stored, by_pid.pop(pid, []), rules))
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
    pid: str, stored: Sequence[StoredEntry], indexed: Sequence[IndexEntry], rules: AuditRules
) -> tuple[StreamAudit, list[Finding]]:
    """Audit one stream, then hold it against its index entries."""
    extra = [
        Finding(pid, position, "missing_field", "lacks " + ",".join(item.lacking))
        for position, item in enumerate(stored, start=1)
        if item.lacking
    ]
    entries = [item.entry for item in stored]
    audit = audit_stream(pid, entries, rules)
    extra += index_findings(pid, entries, indexed, rules)
    return audit, extra


async def _batches(
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
    """Audit the named streams (no index check); for `show` and `list`."""
    out: list[tuple[StreamAudit, list[LedgerEntry]]] = []
    async for batch_pids, groups in _batches(reader, pids):
        for pid, stored in zip(batch_pids, groups, strict=True):
            entries = [item.entry for item in stored]
            if entries:
                out.append((audit_stream(pid, entries, rules), entries))
    return out


async def recent_pids(reader: BulkReader, since_ms: int) -> list[str]:
    """Return the pids with any ledger event at or after `since_ms`, by the index."""
    seen: dict[str, None] = {}
    for item in await reader.index(since_ms=since_ms):
        if items_are_pid(item.pid):
            seen.setdefault(item.pid, None)
    return list(seen)


# ---------------------------------------------------------------------------------------------
# Export (JSON Lines) and offline replay

_ENCODER: Final = msgspec.json.Encoder()


async def export_lines(
    reader: BulkReader,
    *,
    since_ms: int = 0,
    until_ms: int | None = None,
    pid: str | None = None,
) -> AsyncIterator[bytes]:
    """Yield one JSON line per stored entry, in index order, plus `missing_stream` lines."""
    if pid is not None:
        _, streams = await reader.entries([pid])
        for entry in streams[0]:
            yield _ENCODER.encode(entry)
        return
    index = await reader.index(since_ms=since_ms, until_ms=until_ms)
    order: dict[str, None] = {}
    for item in index:
        order.setdefault(item.pid, None)
    pids = [p for p in order if items_are_pid(p)]
    by_pid = group_index(index)
    async for batch_pids, groups in _batches(reader, pids):
        for one, items in zip(batch_pids, groups, strict=True):
            stored = {found.entry.seq: found.entry for found in items}
            for item in by_pid[one]:
                if item.seq in stored:
                    yield _ENCODER.encode(stored.pop(item.seq))
                else:
                    yield _ENCODER.encode(
                        MissingStream(pid=one, seq=item.seq, t=item.t, h=item.h, index_id=item.id)
                    )
            for seq in sorted(stored):  # entries the index range does not name
                yield _ENCODER.encode(stored[seq])


class ExportFile(Struct, kw_only=True):
    """An export read back: entries per pid (in file order) and the missing-stream lines."""

    entries: dict[str, list[LedgerEntry]]
    missing: list[MissingStream]
    bad_lines: list[int]


def read_export(lines: Iterable[bytes]) -> ExportFile:
    """Parse JSON Lines written by `export`; unreadable lines are counted, never guessed."""
    entries: dict[str, list[LedgerEntry]] = {}
    missing: list[MissingStream] = []
    bad: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = msgspec.json.decode(line)
            if isinstance(raw, dict) and raw.get("missing_stream") is True:
                missing.append(msgspec.convert(raw, MissingStream))
                continue
            entry = msgspec.convert(raw, LedgerEntry)
        except (msgspec.DecodeError, msgspec.ValidationError):
            bad.append(number)
            continue
        entries.setdefault(entry.pid, []).append(entry)
    return ExportFile(entries=entries, missing=missing, bad_lines=bad)


def replay_export(export: ExportFile, rules: AuditRules) -> LedgerAudit:
    """Verify and project an export without Redis (§8.13: the auditor's offline replay)."""
    started = time.perf_counter()
    summary = LedgerAudit()
    for number in export.bad_lines:
        summary.findings.append(Finding("", number, "bad_line", "export line is not readable"))
    for pid, entries in export.entries.items():
        ordered = sorted(entries, key=lambda entry: entry.seq)
        summary.add(audit_stream(pid, ordered, rules))
    for line in export.missing:
        summary.findings.append(
            Finding(line.pid, line.seq, "missing_stream", "indexed event absent at export time")
        )
    summary.elapsed_s = time.perf_counter() - started
    return summary
