"""Bulk, read-only ledger reads for auditors and recovery: many streams per round trip.

redis-py parses every reply element in Python (about 13 per stream entry), which caps a scan
at some 20,000 events/s. Here one read-only Lua script packs the XRANGE replies of a whole
batch of keys into a single length-prefixed string, and Python splits it with slicing. The
script only calls TIME and XRANGE; it never writes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

import msgspec
import redis.asyncio as aioredis
import redis.exceptions as rex
from msgspec import Struct
from redis.exceptions import NoScriptError

from ledger.keys import LedgerKeys
from schemas.ledger import LedgerEntry, LedgerUnavailable
from schemas.ledger_events import MAX_ENTRIES

# Per entry: one header of 4-byte big-endian lengths (the ID, then each wanted field, with
# 0xFFFFFFFF for an absent field), followed by those strings. ARGV: count, start, end, fields...
_SCRIPT: Final = """
local count, first, last = ARGV[1], ARGV[2], ARGV[3]
local names = {}
for i = 4, #ARGV do
  names[#names + 1] = ARGV[i]
end
local fmt = '>' .. string.rep('I4', #names + 1)
local absent = 4294967295
local out = {}
local t = redis.call('TIME')
out[1] = struct.pack('>I4I4', tonumber(t[1]), tonumber(t[2]))
for i = 1, #KEYS do
  local items = redis.call('XRANGE', KEYS[i], first, last, 'COUNT', count)
  out[#out + 1] = struct.pack('>I4', #items)
  for _, item in ipairs(items) do
    local kv, map, sizes, values = item[2], {}, {#item[1]}, {item[1]}
    for j = 1, #kv, 2 do
      map[kv[j]] = kv[j + 1]
    end
    for j = 1, #names do
      local value = map[names[j]]
      sizes[j + 1] = value and #value or absent
      values[j + 1] = value or ''
    end
    out[#out + 1] = struct.pack(fmt, unpack(sizes))
    for j = 1, #values do
      out[#out + 1] = values[j]
    end
  end
end
return table.concat(out)
"""
# The fast path: the same reads as JSON built by Redis's C cjson. Used when the reply is pure
# ASCII (every sound ledger is); otherwise the exact bytes come through the packed form above.
_JSON_SCRIPT: Final = """
local count, first, last = ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TIME')
local out = {t[1], t[2]}
for i = 1, #KEYS do
  out[i + 2] = redis.call('XRANGE', KEYS[i], first, last, 'COUNT', count)
end
return cjson.encode(out)
"""
ENTRY_FIELDS: Final = ("e", "h", "t", "eid", "srv_ms", "m")
INDEX_FIELDS: Final = ("pid", "seq", "t", "h")
_ABSENT: Final = 0xFFFFFFFF
STREAM_BATCH: Final = 256  # streams per round trip
INDEX_BATCH: Final = 20_000  # index entries per round trip


class RawItem(Struct, frozen=True, array_like=True, gc=False):
    """One stored stream entry: its ID and the wanted fields in order (None when absent)."""

    id: str
    values: tuple[str | None, ...]


class IndexEntry(Struct, frozen=True, array_like=True, gc=False):
    """One entry of the global index stream: where one event of one send lives."""

    id: str
    pid: str
    seq: int
    t: str
    h: str

    @property
    def ms(self) -> int:
        """Return the Redis time (ms) of the index entry's ID."""
        head, _, _ = self.id.partition("-")
        return int(head) if head.isdigit() else 0


_JsonItem = tuple[str, list[str]]
_JSON_DECODER: Final = msgspec.json.Decoder(list[str | list[_JsonItem] | dict[str, str]])


class BulkReader:
    """Reads many ledger streams, or the index, with few round trips and no writes."""

    def __init__(self, client: aioredis.Redis, keys: LedgerKeys) -> None:
        self.client = client
        self.keys = keys
        self._shas: dict[str, str] = {}

    async def streams(self, pids: Sequence[str]) -> tuple[int, list[list[RawItem]]]:
        """Return (server ms, raw items of each pid's stream, in `pids` order) in one trip."""
        keys = [self.keys.stream(pid) for pid in pids]
        return await self._read(keys, [MAX_ENTRIES + 1, "-", "+"], ENTRY_FIELDS)

    async def entries(self, pids: Sequence[str]) -> tuple[int, list[list[LedgerEntry]]]:
        """Return (server ms, the LedgerEntry list of each pid) for auditors and recovery."""
        now, groups = await self.streams(pids)
        return now, [
            [to_entry(pid, item) for item in items] for pid, items in zip(pids, groups, strict=True)
        ]

    async def index_page(self, start: str, end: str, count: int = INDEX_BATCH) -> list[IndexEntry]:
        """Return up to `count` index entries with IDs in [start, end] (XRANGE syntax)."""
        _, groups = await self._read([self.keys.index], [count, start, end], INDEX_FIELDS)
        return [index_entry(item) for item in groups[0]]

    async def index(self, since_ms: int = 0, until_ms: int | None = None) -> list[IndexEntry]:
        """Return every index entry between two Redis times (inclusive), oldest first."""
        found: list[IndexEntry] = []
        start = f"{since_ms}-0"
        end = "+" if until_ms is None else f"{until_ms}-18446744073709551615"
        while True:
            page = await self.index_page(start, end)
            found += page
            if len(page) < INDEX_BATCH:
                return found
            start = "(" + page[-1].id

    async def stream_pids(self) -> list[str]:
        """Return the pid of every per-send stream key of the namespace (SCAN, no writes)."""
        prefix = self.keys.prefix + "s:"
        pids: list[str] = []
        try:
            async for key in self.client.scan_iter(match=_glob(prefix) + "*", count=2000):
                name = key.decode("latin-1") if isinstance(key, bytes) else str(key)
                pids.append(name[len(prefix) :])
        except (rex.ConnectionError, rex.TimeoutError, OSError):
            raise LedgerUnavailable(maybe_applied=False) from None
        return pids

    async def _read(
        self, keys: Sequence[str], args: Sequence[int | str], names: Sequence[str]
    ) -> tuple[int, list[list[RawItem]]]:
        blob = await self._run(_JSON_SCRIPT, keys, args)
        if blob.isascii():
            try:
                return from_json(_JSON_DECODER.decode(blob), names)
            except (msgspec.DecodeError, ValueError):
                pass  # fall back to the exact packed form below
        packed = await self._run(_SCRIPT, keys, [*args, *names])
        return unpack(packed, len(keys), len(names))

    async def _run(self, script: str, keys: Sequence[str], args: Sequence[int | str]) -> bytes:
        try:
            sha = self._shas.get(script)
            if sha is None:
                sha = self._shas[script] = await self.client.script_load(script)
            try:
                reply = await self.client.evalsha(sha, len(keys), *keys, *args)
            except NoScriptError:
                reply = await self.client.eval(script, len(keys), *keys, *args)
        except (rex.ConnectionError, rex.TimeoutError, OSError):
            raise LedgerUnavailable(maybe_applied=False) from None
        except rex.ResponseError:
            raise LedgerUnavailable(
                "the send ledger store refused a read", maybe_applied=False
            ) from None
        return bytes(reply)


def from_json(
    decoded: list[str | list[_JsonItem] | dict[str, str]], names: Sequence[str]
) -> tuple[int, list[list[RawItem]]]:
    """Turn the JSON reply (TIME, then one XRANGE per key) into raw items."""
    seconds, micros = decoded[0], decoded[1]
    if not isinstance(seconds, str) or not isinstance(micros, str):
        raise ValueError("the read reply lacks the server time")
    out: list[list[RawItem]] = []
    for group in decoded[2:]:
        if isinstance(group, str):
            raise ValueError("the read reply is malformed")
        items: list[RawItem] = []
        for entry_id, flat in group if isinstance(group, list) else ():
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
            items.append(RawItem(entry_id, tuple(fields.get(name) for name in names)))
        out.append(items)
    return int(seconds) * 1000 + int(micros) // 1000, out


def unpack(blob: bytes, groups: int, width: int) -> tuple[int, list[list[RawItem]]]:
    """Split the script's reply into (server ms, per-key raw items of `width` fields)."""
    view = memoryview(blob)
    header = struct.Struct(">" + "I" * (width + 1))
    seconds, micros = struct.unpack_from(">II", view, 0)
    pos = 8
    out: list[list[RawItem]] = []
    for _ in range(groups):
        (count,) = struct.unpack_from(">I", view, pos)
        pos += 4
        items: list[RawItem] = []
        for _ in range(count):
            sizes = header.unpack_from(view, pos)
            pos += header.size
            values: list[str | None] = []
            for size in sizes:
                if size == _ABSENT:
                    values.append(None)
                    continue
                values.append(str(view[pos : pos + size], "latin-1"))
                pos += size
            items.append(RawItem(values[0] or "", tuple(values[1:])))
        out.append(items)
    return seconds * 1000 + micros // 1000, out


def to_entry(pid: str, item: RawItem) -> LedgerEntry:
    """Build a LedgerEntry from raw fields; a missing field becomes empty (the chain flags it)."""
    e, h, t, eid, srv, m = item.values
    extra = {} if m is None else {"m": m}
    return LedgerEntry(
        pid=pid,
        id=item.id,
        e=e or "",
        h=h or "",
        t=t or "",
        eid=eid or "",
        srv_ms=int(srv) if srv is not None and srv.isdigit() else -1,
        **extra,
    )


def index_entry(item: RawItem) -> IndexEntry:
    """Build an IndexEntry from raw fields (seq 0 when unreadable)."""
    pid, seq, t, h = item.values
    return IndexEntry(
        item.id, pid or "", int(seq) if seq and seq.isdigit() else 0, t or "", h or ""
    )


def missing_fields(item: RawItem) -> list[str]:
    """Name the required entry fields that a stored stream entry lacks (m is optional)."""
    required = zip(ENTRY_FIELDS[:5], item.values, strict=False)
    return [name for name, value in required if value is None]


def _glob(text: str) -> str:
    # The namespace and hash tag contain `{`/`}`, which are literal in SCAN's glob; escape the rest.
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)
