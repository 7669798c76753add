"""Exports of the ledger as JSON Lines, and their offline replay without Redis."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable
from typing import Final

import msgspec
from msgspec import Struct

from ledger.audit.checks import AuditRules, Finding, LedgerAudit, audit_stream, group_index
from ledger.audit.verify import batches, items_are_pid
from ledger.projection import entries_as_of
from ledger.store.bulk import BulkReader, id_ms
from schemas.ledger import LedgerEntry


class MissingStream(Struct, frozen=True, kw_only=True):
    """An export line for an index entry whose stream (or entry) Redis no longer has."""

    pid: str
    seq: int
    t: str
    h: str
    index_id: str
    missing_stream: bool = True



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
    async for batch_pids, groups in batches(reader, pids):
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
    """Verify and project an export without Redis, as the ledger stood at `rules.as_of_ms`:
    entries stored later are left out, and so is a send that did not exist yet."""
    started = time.perf_counter()
    summary = LedgerAudit()
    for number in export.bad_lines:
        summary.findings.append(Finding("", number, "bad_line", "export line is not readable"))
    for pid, entries in export.entries.items():
        ordered = entries_as_of(sorted(entries, key=lambda entry: entry.seq), rules.as_of_ms)
        if ordered:
            summary.add(audit_stream(pid, ordered, rules))
    for line in export.missing:
        if id_ms(line.index_id) <= rules.as_of_ms:
            summary.findings.append(
                Finding(line.pid, line.seq, "missing_stream", "indexed event absent at export time")
            )
    summary.elapsed_s = time.perf_counter() - started
    return summary
