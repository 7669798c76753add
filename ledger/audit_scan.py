"""The `verify` scan: plain XREAD/XRANGE replies, a fast pass per stream, and shards on all cores.

A Lua script that packs many XRANGE replies costs Redis several microseconds per entry (its
replies cross into Lua tables and back); plain XREAD of 256 streams costs about one, and
hiredis parses the reply in C into bytes, the exact stored bytes. Each stream goes through
audit_fast first and through the full audit (ledger.audit) only when that pass declines.
Shards are contiguous runs of the sorted pids, so merging them in order keeps every list
(findings, sends to investigate) in today's order.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
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
from ledger.audit_fast import SEQS, Entry, plain_index, sound_audit
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

    async def index_groups(self) -> tuple[int, IndexGroups]:
        """Return (count, every index entry grouped by its pid field, in index order)."""
        groups: IndexGroups = {}
        count = 0
        async for page in self._index_pages():
            for entry in page:
                fields = entry[1]
                pid = fields[1] if plain_index(fields) else _named(fields, b"pid")
                found = groups.get(pid)
                if found is None:
                    groups[pid] = [entry]
                else:
                    found.append(entry)
            count += len(page)
        return count, groups

    async def index_digests(
        self, streams: Sequence[str], key: bytes
    ) -> tuple[int, dict[bytes, bytes], IndexGroups]:
        """Read the index as verify needs it: (count, the keyed digest of each stream's index
        text, the entries of pids without a stream).

        Entries are joined page by page, so the parsed replies are freed as the read goes.
        """
        listed = {pid.encode("latin-1") for pid in streams}
        texts: dict[bytes, list[bytes]] = {}
        irregular: set[bytes] = set()
        orphans: IndexGroups = {}
        count = 0
        async for page in self._index_pages():
            count += len(page)
            for entry in page:
                fields = entry[1]
                plain = plain_index(fields)
                pid = fields[1] if plain else _named(fields, b"pid")
                if pid not in listed:
                    orphans.setdefault(pid, []).append(entry)
                    continue
                parts = texts.get(pid)
                if parts is None:
                    parts = texts[pid] = []
                # As audit_fast.index_text: pid, seq, t, h, with seq 1, 2, ... in order.
                seq = len(parts) // 2 + 1
                if plain and seq <= MAX_ENTRIES and fields[3] == SEQS[seq]:
                    parts.append(fields[5])
                    parts.append(fields[7])
                else:
                    irregular.add(pid)
        digests = {
            pid: index_digest(b"%d\n" % (len(parts) // 2) + b"\n".join(parts), key)
            for pid, parts in texts.items()
            if pid not in irregular
        }
        return count, digests, orphans

    async def _index_pages(self) -> AsyncIterator[list[Entry]]:
        """Yield the whole index page by page; Redis reads the next page while one is handled."""
        await self._send("XRANGE", self.keys.index, "-", "+", "COUNT", INDEX_BATCH)
        while True:
            page: list[Entry] = await self._read() or []
            if len(page) == INDEX_BATCH:
                start = b"(" + page[-1][0]
                await self._send("XRANGE", self.keys.index, start, "+", "COUNT", INDEX_BATCH)
            yield page
            if len(page) < INDEX_BATCH:
                return

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


class ScanResult(Struct, array_like=True):
    """What a scan of some streams found, per pid in order, compactly (it crosses a pipe).

    A stream the fast pass judged, and whose index agreed, has its status and event count
    (and its StreamAudit when it needs investigation). Any other stream has status "": its
    raw items are in `raw` when the fast pass declined, else it is read again for the full
    audit (its index disagreed).
    """

    statuses: list[str]
    events: list[int]
    investigate: dict[int, StreamAudit]
    raw: dict[int, list[RawItem]]


IndexDigests = Callable[[], Awaitable[Sequence[bytes | None]]]  # per pid of a scan, in order


def index_digest(text: bytes, key: bytes) -> bytes:
    """The keyed digest of an index text: without the key, no one can aim for a collision."""
    return hashlib.blake2b(text, key=key, digest_size=16).digest()


async def scan_streams(
    client: aioredis.Redis,
    keys: LedgerKeys,
    pids: Sequence[str],
    rules: AuditRules,
    digest_key: bytes,
    digests_of: IndexDigests,
    progress: Progress | None = None,
) -> ScanResult:
    """Check the streams of `pids` (sorted), then their index through its digests."""
    result = ScanResult([], [], {}, {})
    expected: list[bytes | None] = []
    chunks = [pids[start : start + STREAM_BATCH] for start in range(0, len(pids), STREAM_BATCH)]
    prefix = (keys.prefix + "s:").encode()
    events = 0
    if chunks:
        async with RawReader(client, keys) as raw:
            await raw.send_streams(chunks[0])
            for position, chunk in enumerate(chunks):
                streams = await raw.read_streams()
                if position + 1 < len(chunks):
                    await raw.send_streams(chunks[position + 1])
                if streams is None:
                    _, groups = await BulkReader(client, keys).streams(chunk)
                    for items in groups:
                        result.raw[len(result.statuses)] = items
                        result.statuses.append("")
                        result.events.append(len(items))
                        expected.append(None)
                else:
                    _judge_chunk(result, expected, chunk, streams, prefix, rules, digest_key)
                events += sum(result.events[-len(chunk) :])
                if progress is not None:
                    progress(len(result.statuses), events)
    stored = await digests_of()
    for number, digest in enumerate(expected):
        if digest is not None and digest != stored[number]:
            result.statuses[number] = ""  # the index disagrees: the full audit will say how
            result.investigate.pop(number, None)
    return result


def _judge_chunk(
    result: ScanResult,
    expected: list[bytes | None],
    chunk: Sequence[str],
    streams: Mapping[bytes, list[Entry]],
    prefix: bytes,
    rules: AuditRules,
    digest_key: bytes,
) -> None:
    for pid in chunk:
        number = len(result.statuses)
        entries = streams.get(prefix + pid.encode(), [])
        judged = sound_audit(pid, entries, rules) if entries else None
        if judged is None:
            result.raw[number] = [raw_item_of(entry) for entry in entries]
            result.statuses.append("")
            result.events.append(len(entries))
            expected.append(None)
            continue
        audit, text = judged
        result.statuses.append(audit.status)
        result.events.append(audit.events)
        expected.append(index_digest(text, digest_key))
        if audit.investigate:
            result.investigate[number] = audit


async def merge_scan(
    summary: LedgerAudit,
    reader: BulkReader,
    pids: Sequence[str],
    result: ScanResult,
    by_pid: Mapping[bytes, list[Entry]],
    rules: AuditRules,
) -> None:
    """Fold a scan into the summary in pid order, with the full audit (against the index
    entries in `by_pid`) for every stream without a fast verdict."""
    if "" not in result.statuses:  # every stream is judged: fold them all at once
        summary.streams += len(result.statuses)
        summary.events += sum(result.events)
        for status, count in collections.Counter(result.statuses).items():  # first-seen order
            summary.statuses[status] = summary.statuses.get(status, 0) + count
        summary.investigate += [result.investigate[n] for n in sorted(result.investigate)]
        return
    for number, pid in enumerate(pids):
        status = result.statuses[number]
        if status:
            summary.add(_judged(pid, result, number))
            continue
        items = result.raw.get(number)
        if items is None:
            _, groups = await reader.streams([pid])
            items = groups[0]
        listed = by_pid.get(pid.encode("latin-1"), [])
        summary.add(*full_check(pid, items, [index_entry_of(entry) for entry in listed], rules))


def _judged(pid: str, result: ScanResult, number: int) -> StreamAudit:
    found = result.investigate.get(number)
    if found is not None:
        return found
    return StreamAudit(pid=pid, events=result.events[number], status=result.statuses[number])


def leftover_findings(by_pid: Mapping[bytes, list[Entry]], rules: AuditRules) -> list[Finding]:
    """Judge the index entries left without a stream, in pid order (§8.13 item 10)."""
    found: list[Finding] = []
    for key, listed in sorted(by_pid.items()):
        pid = key.decode("latin-1")
        if not items_are_pid(pid):
            found.append(Finding(pid, 0, "index_malformed", "index names no pid"))
            continue
        found += missing_stream_findings(pid, [index_entry_of(entry) for entry in listed], rules)
    return found


def items_are_pid(pid: str) -> bool:
    """Tell whether a text is a prepared_id (32 lowercase hex)."""
    return len(pid) == 32 and set(pid) <= _PID_CHARS


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


def _named(flat: Sequence[bytes], name: bytes) -> bytes:
    return _fields(flat).get(name, b"")


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
