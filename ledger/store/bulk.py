"""Bulk, read-only ledger reads for auditors and recovery: many streams per round trip.

Plain XRANGE commands, pipelined STREAM_BATCH at a time (hiredis parses the replies in C), the
index and recovery's sorted sets read in pages, and the stream keys listed with SCAN. Nothing
here writes. Entries are
parsed leniently: a stored entry that lacks a required field is still returned, with the
fields it lacks named, so that an audit can report it instead of stopping at it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple, TypeVar, cast

from msgspec import Struct

from ledger.store.answers import OpenMember, text, time_ms
from ledger.store.connection import UNREACHABLE, StoreClient
from ledger.store.keys import LedgerKeys
from schemas.ledger import LedgerCorrupt, LedgerEntry, LedgerUnavailable
from schemas.ledger_events import MAX_ENTRIES

T = TypeVar("T")
REQUIRED_FIELDS: Final = ("e", "h", "t", "eid", "srv_ms")
STREAM_BATCH: Final = 256  # streams per round trip
INDEX_PAGE: Final = 10_000  # index entries per round trip
SET_PAGE: Final = 5_000  # members of recovery's sorted sets per round trip


class StoredEntry(NamedTuple):
    """One stream entry as read, and the required fields it lacked (empty when whole)."""

    entry: LedgerEntry
    lacking: tuple[str, ...]


class IndexEntry(Struct, frozen=True):
    """One entry of the global index stream: where one event of one send lives."""

    id: str
    pid: str
    seq: int
    t: str
    h: str

    @property
    def ms(self) -> int:
        """Return the Redis time (ms) of the index entry's ID."""
        return id_ms(self.id)


def id_ms(entry_id: str) -> int:
    """The Redis time (ms) a stream entry ID `<ms>-<n>` was made at (0 when malformed)."""
    head, _, _ = entry_id.partition("-")
    return int(head) if head.isdigit() else 0


def _decoded(raw_fields: Any) -> dict[str, str]:
    """An entry's fields as text; latin-1 maps the stored bytes 1:1, so hashes stay verifiable."""
    try:  # the ledger's clients return bytes: decode inline, a function call per value costs
        return {k.decode("latin-1"): v.decode("latin-1") for k, v in (raw_fields or {}).items()}
    except AttributeError:
        return {text(k): text(v) for k, v in raw_fields.items()}


def stored_entry(pid: str, item: Any) -> StoredEntry:
    """Parse one XRANGE item; absent fields become "" (srv_ms -1) and are named in `lacking`."""
    entry_id, raw_fields = item
    fields = _decoded(raw_fields)
    lacking = tuple(name for name in REQUIRED_FIELDS if name not in fields)
    srv_ms = fields.get("srv_ms", "")
    mac = fields.get("m")
    entry = LedgerEntry(
        pid=pid,
        id=text(entry_id),
        e=fields.get("e", ""),
        h=fields.get("h", ""),
        t=fields.get("t", ""),
        eid=fields.get("eid", ""),
        srv_ms=int(srv_ms) if srv_ms.isdigit() else -1,
        **({} if mac is None else {"m": mac}),
    )
    return StoredEntry(entry, lacking)


def entry_from(pid: str, item: Any) -> LedgerEntry:
    """Parse one XRANGE item strictly: a missing field or a bad server time is corruption."""
    entry, lacking = stored_entry(pid, item)
    if lacking:
        raise LedgerCorrupt("a send ledger entry lacks a required field")
    if entry.srv_ms < 0:
        raise LedgerCorrupt("a send ledger entry has a malformed server time")
    return entry


def index_entry_from(item: Any) -> IndexEntry:
    """Parse one index item; unreadable fields become "" (seq 0), which an audit reports."""
    entry_id, raw_fields = item
    fields = _decoded(raw_fields)
    seq = fields.get("seq", "")
    return IndexEntry(
        text(entry_id),
        fields.get("pid", ""),
        int(seq) if seq.isdigit() else 0,
        fields.get("t", ""),
        fields.get("h", ""),
    )


class BulkReader:
    """Reads many ledger streams, or the index, with few round trips and no writes."""

    def __init__(self, client: StoreClient, keys: LedgerKeys) -> None:
        self.client = client
        self.keys = keys

    async def streams(self, pids: Sequence[str]) -> tuple[int, list[list[StoredEntry]]]:
        """Return (server ms, each pid's stored entries, in `pids` order) in one round trip."""
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.execute_command("TIME")  # pipe.time() is refused by a cluster pipeline
                for pid in pids:
                    pipe.xrange(self.keys.stream(pid), count=MAX_ENTRIES + 1)
                now, *groups = await pipe.execute()
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None
        return time_ms(now), [
            [stored_entry(pid, item) for item in items]
            for pid, items in zip(pids, groups, strict=True)
        ]

    async def entries(self, pids: Sequence[str]) -> tuple[int, list[list[LedgerEntry]]]:
        """Return (server ms, the entries of each pid) for recovery and exports."""
        now, groups = await self.streams(pids)
        return now, [[stored.entry for stored in group] for group in groups]

    async def index(self, since_ms: int = 0, until_ms: int | None = None) -> list[IndexEntry]:
        """Return every index entry between two Redis times (inclusive), oldest first."""
        found: list[IndexEntry] = []
        start = f"{since_ms}-0"
        end = "+" if until_ms is None else f"{until_ms}-18446744073709551615"
        while True:
            try:
                rows = await self.client.xrange(self.keys.index, start, end, count=INDEX_PAGE)
            except UNREACHABLE:
                raise LedgerUnavailable(maybe_applied=False) from None
            page = list(rows or ())
            found += [index_entry_from(item) for item in page]
            if len(page) < INDEX_PAGE:
                return found
            start = "(" + found[-1].id

    async def open_members(self, older_than_ms: int) -> list[OpenMember]:
        """Every `open` member (claim or filing) stored before the cutoff, oldest first."""
        members: list[OpenMember] = []
        for member, score in await self._snapshot(self.keys.open, f"({older_than_ms}"):
            kind, _, pid = member.partition(":")
            if kind in ("d", "f") and len(pid) == 32:
                members.append(OpenMember("dispatch" if kind == "d" else "filing", pid, score))
        return members

    async def due_unclaimed(self, now_ms: int) -> list[str]:
        """Every unclaimed preparation whose deadline is at or before `now_ms`."""
        return [pid for pid, _ in await self._snapshot(self.keys.unclaimed, str(now_ms))]

    async def due_evidence(self, now_ms: int) -> list[tuple[str, int]]:
        """Every unknown send whose next search for evidence is due by `now_ms`, with its score."""
        return await self._snapshot(self.keys.evidence, str(now_ms))

    async def leases_alive(self, dispatcher_ids: Sequence[str]) -> list[bool]:
        """Tell, for each dispatcher id, whether its lease key exists (one round trip)."""
        if not dispatcher_ids:
            return []
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for dispatcher_id in dispatcher_ids:
                    pipe.exists(self.keys.lease(dispatcher_id))
                found = await pipe.execute()
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None
        return [bool(n) for n in found]

    async def _snapshot(self, key: str, upper: str) -> list[tuple[str, int]]:
        """All members of a sorted set scored up to `upper`, read in pages before any decision
        (removals during a recovery pass cannot then shift the pages)."""
        rows: list[tuple[str, int]] = []
        try:
            while True:
                page = cast(
                    list[tuple[bytes, float]],
                    await self.client.zrangebyscore(
                        key, "-inf", upper, start=len(rows), num=SET_PAGE, withscores=True
                    ),
                )
                rows += [(text(member), int(score)) for member, score in page]
                if len(page) < SET_PAGE:
                    return rows
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None

    async def stream_pids(self) -> list[str]:
        """Return the pid part of every per-send stream key of the namespace (SCAN, no writes)."""
        prefix = self.keys.prefix + "s:"
        pids: list[str] = []
        try:
            async for key in self.client.scan_iter(match=_glob(prefix) + "*", count=2000):
                pids.append(text(key)[len(prefix) :])
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None
        return pids


def pages(items: Sequence[T], size: int) -> list[list[T]]:
    """Split candidates into lists of at most `size`, each read and decided in one round trip."""
    return [list(items[start : start + size]) for start in range(0, len(items), size)]


def _glob(text: str) -> str:
    # The namespace and hash tag contain `{`/`}`, which are literal in SCAN's glob; escape the rest.
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)
