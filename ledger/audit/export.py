"""Exports of the ledger as JSON Lines, and their offline replay without Redis.

An export is a manifest line, one line per stored entry (or per indexed entry Redis no longer
holds), and a trailer binding them all (ledger/audit/manifest.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable
from typing import Final

import msgspec
from msgspec import Struct, UnsetType, field

from ledger.audit.checks import AuditRules, Finding, audit_stream, group_index
from ledger.audit.manifest import (
    Binder,
    Manifest,
    Trailer,
    as_manifest,
    as_trailer,
    marker,
    trailer_mac,
)
from ledger.audit.summary import LedgerAudit
from ledger.audit.verify import batches, items_are_pid
from ledger.chain import event_mac, mac_key_id
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
    manifest: Manifest,
    *,
    key: bytes | None = None,
) -> AsyncIterator[bytes]:
    """Yield the manifest, one JSON line per stored entry in index order (plus `missing_stream`
    lines), and the trailer; `manifest` names the range, its counts are filled in here."""
    binder = Binder()
    counts = {"lines": 0, "events": 0, "missing": 0}

    def emit(line: bytes, kind: str) -> bytes:
        binder.add(line)
        counts["lines"] += 1
        counts[kind] += 1
        return line

    if manifest.pid:
        _, streams = await reader.entries([manifest.pid])
        head = msgspec.structs.replace(manifest, streams=1 if streams[0] else 0, index_entries=0)
        yield _first(binder, head)
        for entry in streams[0]:
            yield emit(_ENCODER.encode(entry), "events")
        yield _trailer(binder, counts, head.streams, key)
        return
    index = await reader.index(since_ms=manifest.since_ms, until_ms=manifest.until_ms)
    order: dict[str, None] = {}
    for item in index:
        order.setdefault(item.pid, None)
    pids = [p for p in order if items_are_pid(p)]
    by_pid = group_index(index)
    head = msgspec.structs.replace(manifest, streams=len(pids), index_entries=len(index))
    yield _first(binder, head)
    async for batch_pids, groups in batches(reader, pids):
        for one, items in zip(batch_pids, groups, strict=True):
            stored = {found.entry.seq: found.entry for found in items}
            for item in by_pid[one]:
                if item.seq in stored:
                    yield emit(_ENCODER.encode(stored.pop(item.seq)), "events")
                else:
                    gone = MissingStream(
                        pid=one, seq=item.seq, t=item.t, h=item.h, index_id=item.id
                    )
                    yield emit(_ENCODER.encode(gone), "missing")
            for seq in sorted(stored):  # entries the index range does not name
                yield emit(_ENCODER.encode(stored[seq]), "events")
    yield _trailer(binder, counts, head.streams, key)


def _first(binder: Binder, manifest: Manifest) -> bytes:
    line = _ENCODER.encode(manifest)
    binder.add(line)
    return line


def _trailer(binder: Binder, counts: dict[str, int], streams: int, key: bytes | None) -> bytes:
    digest = binder.hexdigest()
    return _ENCODER.encode(
        Trailer(
            lines=counts["lines"], streams=streams, events=counts["events"],
            missing=counts["missing"], sha256=digest,
            mac="" if key is None else trailer_mac(key, digest),
        )
    )  # fmt: skip


class ExportFile(Struct, kw_only=True):
    """An export read back: entries per pid (in file order), the missing-stream lines, the
    manifest and trailer (None when absent) and what the lines hash to."""

    entries: dict[str, list[LedgerEntry]]
    missing: list[MissingStream]
    bad_lines: list[int]
    manifest: Manifest | None = None
    trailer: Trailer | None = None
    lines: int = 0  # entry and missing-stream lines read, readable or not
    sha256: str = ""  # of every line before the trailer
    problems: list[Finding] = field(default_factory=list)  # about the file's own structure


def read_export(lines: Iterable[bytes]) -> ExportFile:
    """Parse JSON Lines written by `export`; unreadable lines are counted, never guessed."""
    export = ExportFile(entries={}, missing=[], bad_lines=[])
    binder = Binder()
    for number, line in enumerate(lines, start=1):
        body = line[:-1] if line.endswith(b"\n") else line
        if not body.strip():
            continue
        if export.trailer is not None:
            export.problems.append(
                Finding("", number, "export_altered", "a line follows the export's trailer")
            )
            continue
        try:
            raw = msgspec.json.decode(body)
        except msgspec.DecodeError:
            raw = None
        kind = marker(raw)
        if kind == "trailer":
            export.trailer = as_trailer(raw)
            export.sha256 = binder.hexdigest()
            if export.trailer is None:
                export.problems.append(
                    Finding("", number, "bad_line", "the trailer is not readable")
                )
            continue
        binder.add(body)
        if kind == "manifest":
            if number != 1 or export.manifest is not None:
                export.problems.append(
                    Finding("", number, "export_altered", "a manifest line that is not the first")
                )
            else:
                export.manifest = as_manifest(raw)
                if export.manifest is None:
                    export.problems.append(
                        Finding("", number, "bad_line", "the manifest is not readable")
                    )
            continue
        export.lines += 1
        _take(export, raw, number)
    return export


def _take(export: ExportFile, raw: object, number: int) -> None:
    try:
        if isinstance(raw, dict) and raw.get("missing_stream") is True:
            export.missing.append(msgspec.convert(raw, MissingStream))
            return
        entry = msgspec.convert(raw, LedgerEntry)
    except msgspec.ValidationError:
        export.bad_lines.append(number)
        return
    export.entries.setdefault(entry.pid, []).append(entry)


def completeness_findings(export: ExportFile, key: bytes | None) -> list[Finding]:
    """Hold the lines against the manifest and trailer: a cut tail, a removed send or event,
    an edited line, and with the key a recomputed trailer, each named as such."""
    manifest, trailer = export.manifest, export.trailer
    if manifest is None:
        return []  # an export from before manifests: nothing to hold the lines against
    found: list[Finding] = []
    if trailer is None:
        return [Finding("", 0, "export_truncated", "the export ends without its trailer: its "
                        "end was cut off")]  # fmt: skip
    streams = len(export.entries) + len({m.pid for m in export.missing} - set(export.entries))
    events = sum(len(entries) for entries in export.entries.values())
    if streams < manifest.streams or streams < trailer.streams:
        found.append(Finding("", 0, "export_send_removed", f"the export named "
                             f"{max(manifest.streams, trailer.streams)} send(s); {streams} "
                             "remain in the file"))  # fmt: skip
    elif streams > trailer.streams:
        found.append(Finding("", 0, "export_send_added", f"the export named {trailer.streams} "
                             f"send(s); the file holds {streams}"))  # fmt: skip
    if events < trailer.events and not found:
        found.append(Finding("", 0, "export_events_removed", f"the export wrote "
                             f"{trailer.events} event(s); {events} remain"))  # fmt: skip
    elif events > trailer.events and not found:
        found.append(Finding("", 0, "export_events_added", f"the export wrote "
                             f"{trailer.events} event(s); the file holds {events}"))  # fmt: skip
    if export.sha256 != trailer.sha256 and not found:
        found.append(Finding("", 0, "export_altered", "the lines do not hash to the trailer's "
                             "sha256: a line was changed"))  # fmt: skip
    sealed = key is not None and manifest.mac_key_id == mac_key_id(key)
    if sealed and not (trailer.mac and trailer_mac(key or b"", trailer.sha256) == trailer.mac):
        found.append(
            Finding(
                "", 0, "export_mac_mismatch",
                "the trailer's MAC does not verify: the export was rewritten after it was made",
            )
        )  # fmt: skip
    return found


def sealed_key_id(export: ExportFile) -> str:
    """The key ID the export was sealed under: the manifest's, or '?' for an older export whose
    entries carry MACs, or '' when nothing is sealed."""
    if export.manifest is not None:
        return export.manifest.mac_key_id
    for entries in export.entries.values():
        if any(not isinstance(entry.m, UnsetType) for entry in entries):
            return "?"
    return ""


def every_mac_fails(export: ExportFile, key: bytes) -> bool:
    """Tell whether no entry's MAC verifies under `key` (an older export with a wrong key)."""
    sealed = [
        entry
        for entries in export.entries.values()
        for entry in entries
        if not isinstance(entry.m, UnsetType)
    ]
    return bool(sealed) and all(event_mac(key, entry.h) != entry.m for entry in sealed)


def replay_export(
    export: ExportFile, rules: AuditRules, *, keep_steps: bool = False
) -> LedgerAudit:
    """Verify and project an export without Redis, as the ledger stood at `rules.as_of_ms`:
    entries stored later are left out, and so is a send that did not exist yet."""
    started = time.perf_counter()
    summary = LedgerAudit(keep_steps=keep_steps)
    summary.findings += export.problems
    for number in export.bad_lines:
        summary.findings.append(Finding("", number, "bad_line", "export line is not readable"))
    summary.findings += completeness_findings(export, rules.key)
    for pid, entries in export.entries.items():
        ordered = entries_as_of(sorted(entries, key=lambda entry: entry.seq), rules.as_of_ms)
        if ordered:
            summary.add(audit_stream(pid, ordered, rules), ordered)
    for line in export.missing:
        if id_ms(line.index_id) <= rules.as_of_ms:
            summary.findings.append(
                Finding(line.pid, line.seq, "missing_stream", "indexed event absent at export time")
            )
    summary.elapsed_s = time.perf_counter() - started
    return summary
