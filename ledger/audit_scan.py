"""The `verify` scan: plain XREAD/XRANGE replies, a fast pass per stream, and shards on all cores.

A Lua script that packs many XRANGE replies costs Redis several microseconds per entry (its
replies cross into Lua tables and back); plain XREAD of 256 streams costs about one, and
hiredis parses the reply in C into bytes, the exact stored bytes. Each stream goes through
audit_fast first and through the full audit (ledger.audit) only when that pass declines.
Shards are contiguous runs of the sorted pids, so merging them in order keeps every list
(findings, sends to investigate) in today's order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import redis.asyncio as aioredis
import redis.exceptions as rex
from msgspec import Struct
from redis.asyncio.connection import AbstractConnection

from ledger.audit import (
    AuditRules,
    Finding,
    LedgerAudit,
    StreamAudit,
    audit_stream,
    index_findings,
    missing_stream_findings,
)
from ledger.audit_fast import Entry, sound_audit
from ledger.audit_read import (
    ENTRY_FIELDS,
    INDEX_BATCH,
    STREAM_BATCH,
    BulkReader,
    IndexEntry,
    RawItem,
    missing_fields,
    to_entry,
)
from ledger.keys import LedgerKeys
from schemas.ledger import LedgerUnavailable
from schemas.ledger_events import MAX_ENTRIES

Progress = Callable[[int, int], None]  # (streams done, events done)
IndexGroups = dict[bytes, list[Entry]]
_STREAM_COUNT: Final = MAX_ENTRIES + 1
_PID_CHARS: Final = frozenset("0123456789abcdef")


class RawReader:
    """Pipelined XREAD/XRANGE on one connection of the client's pool; replies as hiredis bytes."""

    def __init__(self, client: aioredis.Redis, keys: LedgerKeys) -> None:
        self.client = client
        self.keys = keys
        self._conn: AbstractConnection | None = None

    async def __aenter__(self) -> RawReader:
        try:
            self._conn = await self.client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        except (rex.ConnectionError, rex.TimeoutError, OSError):
            raise LedgerUnavailable(maybe_applied=False) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if exc[0] is not None:  # replies may still be in flight: never hand them to another user
            await conn.disconnect()
        await self.client.connection_pool.release(conn)

    async def send_streams(self, pids: Sequence[str]) -> None:
        """Ask for the entries of each pid's stream (read them with read_streams)."""
        keys = [self.keys.stream(pid) for pid in pids]
        await self._send("XREAD", "COUNT", _STREAM_COUNT, "STREAMS", *keys, *["0-0"] * len(keys))

    async def read_streams(self) -> dict[bytes, list[Entry]] | None:
        """Return the entries per stream key of the oldest request, or None if Redis refused."""
        try:
            reply = await self._read()
        except rex.ResponseError:  # e.g. WRONGTYPE: a key of the namespace is not a stream
            return None
        if reply is None:
            return {}
        if isinstance(reply, dict):  # RESP3 answers a map
            return reply
        return {key: entries for key, entries in reply}

    async def index_groups(
        self, low: bytes = b"", high: bytes | None = None
    ) -> tuple[int, IndexGroups]:
        """Return (count, index entries grouped by pid, in index order) for low <= pid < high."""
        groups: IndexGroups = {}
        count = 0
        await self._send("XRANGE", self.keys.index, "-", "+", "COUNT", INDEX_BATCH)
        while True:
            page: list[Entry] = await self._read() or []
            if len(page) == INDEX_BATCH:  # Redis reads the next page while this one is grouped
                start = b"(" + page[-1][0]
                await self._send("XRANGE", self.keys.index, start, "+", "COUNT", INDEX_BATCH)
            for entry in page:
                fields = entry[1]
                pid = fields[1] if _plain_index(fields) else _named(fields, b"pid")
                if pid < low or (high is not None and pid >= high):
                    continue
                count += 1
                found = groups.get(pid)
                if found is None:
                    groups[pid] = [entry]
                else:
                    found.append(entry)
            if len(page) < INDEX_BATCH:
                return count, groups

    async def _send(self, *args: Any) -> None:
        conn = self._connection()
        try:
            await conn.send_packed_command(conn.pack_command(*args))
        except (rex.ConnectionError, rex.TimeoutError, OSError):
            raise LedgerUnavailable(maybe_applied=False) from None

    async def _read(self) -> Any:
        try:
            return await self._connection().read_response(disable_decoding=True)
        except (rex.ConnectionError, rex.TimeoutError, OSError):
            raise LedgerUnavailable(maybe_applied=False) from None

    def _connection(self) -> AbstractConnection:
        if self._conn is None:
            raise RuntimeError("RawReader is used outside `async with`")
        return self._conn


class ShardResult(Struct, kw_only=True):
    """One shard's share of `verify`: its streams, its index entries without a stream, a count."""

    summary: LedgerAudit
    leftovers: list[Finding]
    index_entries: int


async def verify_shard(
    client: aioredis.Redis,
    keys: LedgerKeys,
    rules: AuditRules,
    pids: Awaitable[list[str]],
    low: bytes = b"",
    high: bytes | None = None,
    progress: Progress | None = None,
) -> ShardResult:
    """Verify the streams of the sorted `pids` (all in [low, high)) and the index in that range."""
    async with RawReader(client, keys) as raw:
        count, by_pid = await raw.index_groups(low, high)
    scanned = await pids
    summary = await scan_streams(client, keys, scanned, by_pid, rules, progress)
    return ShardResult(
        summary=summary, leftovers=leftover_findings(by_pid, scanned, rules), index_entries=count
    )


def leftover_findings(
    by_pid: Mapping[bytes, list[Entry]], scanned: Sequence[str], rules: AuditRules
) -> list[Finding]:
    """Judge the index entries of pids without a stream, in pid order (§8.13 item 10)."""
    found: list[Finding] = []
    streams = {pid.encode("latin-1") for pid in scanned}
    for key, listed in sorted(by_pid.items()):
        if key in streams:
            continue
        pid = key.decode("latin-1")
        if not items_are_pid(pid):
            found.append(Finding(pid, 0, "index_malformed", "index names no pid"))
            continue
        found += missing_stream_findings(pid, [index_entry_of(entry) for entry in listed], rules)
    return found


def items_are_pid(pid: str) -> bool:
    """Tell whether a text is a prepared_id (32 lowercase hex)."""
    return len(pid) == 32 and set(pid) <= _PID_CHARS


async def scan_streams(
    client: aioredis.Redis,
    keys: LedgerKeys,
    pids: Sequence[str],
    by_pid: Mapping[bytes, list[Entry]],
    rules: AuditRules,
    progress: Progress | None = None,
) -> LedgerAudit:
    """Verify the streams of `pids` (sorted) against their index entries; a partial summary."""
    summary = LedgerAudit()
    chunks = [pids[start : start + STREAM_BATCH] for start in range(0, len(pids), STREAM_BATCH)]
    if not chunks:
        return summary
    async with RawReader(client, keys) as raw:
        await raw.send_streams(chunks[0])
        for position, chunk in enumerate(chunks):
            streams = await raw.read_streams()
            if position + 1 < len(chunks):
                await raw.send_streams(chunks[position + 1])
            if streams is None:
                _, groups = await BulkReader(client, keys).streams(chunk)
                for pid, items in zip(chunk, groups, strict=True):
                    listed = by_pid.get(pid.encode("latin-1"), [])
                    summary.add(*full_check(pid, items, [index_entry_of(e) for e in listed], rules))
            else:
                _check_chunk(summary, keys, chunk, streams, by_pid, rules)
            if progress is not None:
                progress(summary.streams, summary.events)
    return summary


def _check_chunk(
    summary: LedgerAudit,
    keys: LedgerKeys,
    chunk: Sequence[str],
    streams: Mapping[bytes, list[Entry]],
    by_pid: Mapping[bytes, list[Entry]],
    rules: AuditRules,
) -> None:
    for pid in chunk:
        entries = streams.get(keys.stream(pid).encode(), [])
        listed = by_pid.get(pid.encode("latin-1"), [])
        audit = sound_audit(pid, entries, listed, rules) if entries else None
        if audit is not None:
            summary.add(audit)
            continue
        items = [raw_item_of(entry) for entry in entries]
        summary.add(*full_check(pid, items, [index_entry_of(e) for e in listed], rules))


def full_check(
    pid: str, items: Sequence[RawItem], indexed: Sequence[IndexEntry], rules: AuditRules
) -> tuple[StreamAudit, list[Finding]]:
    """The full audit of one stream: missing fields, §8.13 items 1-9, and its index entries."""
    extra: list[Finding] = []
    for position, item in enumerate(items, start=1):
        lacking = missing_fields(item)
        if lacking:
            extra.append(Finding(pid, position, "missing_field", "lacks " + ",".join(lacking)))
    entries = [to_entry(pid, item) for item in items]
    audit = audit_stream(pid, entries, rules)
    extra += index_findings(pid, entries, indexed, rules)
    return audit, extra


def raw_item_of(entry: Entry) -> RawItem:
    """The RawItem of a stream entry as hiredis gave it (bytes mapped 1:1 to latin-1)."""
    fields = _fields(entry[1])
    values = tuple(_text(fields.get(name.encode("ascii"))) for name in ENTRY_FIELDS)
    return RawItem(entry[0].decode("latin-1"), values)


def index_entry_of(entry: Entry) -> IndexEntry:
    """The IndexEntry of an index entry as hiredis gave it (seq 0 when unreadable)."""
    fields = _fields(entry[1])
    seq = _text(fields.get(b"seq")) or ""
    return IndexEntry(
        entry[0].decode("latin-1"),
        _text(fields.get(b"pid")) or "",
        int(seq) if seq.isdigit() else 0,
        _text(fields.get(b"t")) or "",
        _text(fields.get(b"h")) or "",
    )


def _fields(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    # A later duplicate name wins, as in the Lua map the packed read builds.
    return dict(zip(flat[::2], flat[1::2], strict=False))


def _plain_index(flat: Sequence[bytes]) -> bool:
    return (
        len(flat) == 8
        and flat[0] == b"pid"
        and flat[2] == b"seq"
        and flat[4] == b"t"
        and flat[6] == b"h"
    )


def _named(flat: Sequence[bytes], name: bytes) -> bytes:
    return _fields(flat).get(name, b"")


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
