"""The archiver's side of Redis: its lease, its position, the next index entries, expiry.

The position (`archive_pos`, the last archived index entry ID, and `archive_n`, the records
archived) lives in the ledger's meta hash, so the ledger's own scripts see that an archive
exists and keep every unarchived stream and index entry until the archiver has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from ledger.ids import new_id
from ledger.store.answers import text
from ledger.store.bulk import BulkReader, IndexEntry, index_entry_from, pages, stored_entry
from ledger.store.connection import UNREACHABLE, StoreClient
from ledger.store.keys import LedgerKeys
from ledger.store.lua_scripts import LuaScripts
from schemas.ledger import LedgerEntry, LedgerUnavailable, pid_fits

SCRIPTS: Final = LuaScripts("ledger.store", ("archive",))
NO_POSITION: Final = "0-0"


class ArchiveRefused(Exception):
    """The store and the archive disagree in a way only a person may settle; nothing written."""


class Enrolled(NamedTuple):
    """The position as Redis holds it, and the ledger facts the archive records."""

    pos: str
    n: int
    store_id: str
    retention_ms: int


class Fetched(NamedTuple):
    """One index entry and its stream entry (None when Redis no longer holds it)."""

    item: IndexEntry
    entry: LedgerEntry | None


class ArchivePosition:
    """Reads the ledger for the archiver and moves its position, under its lease."""

    def __init__(self, client: StoreClient, keys: LedgerKeys, token: str) -> None:
        self.client = client
        self.keys = keys
        self.token = token
        self._script = client.register_script(SCRIPTS.source("archive"))

    async def _run(self, op: str, *args: str | int, streams: Sequence[str] = ()) -> list[Any]:
        keys = [self.keys.meta, self.keys.archive_lease, *streams]
        try:
            reply = await self._script(keys=keys, args=[op, self.token, *args])
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=True) from None
        return [text(item) if isinstance(item, bytes) else item for item in reply]

    async def take_lease(self, ttl_ms: int, previous: str = "") -> int:
        """Take or renew the lease (or take over `previous`'s); return 0, or the ms another
        archiver still holds it for."""
        reply = await self._run("lease", ttl_ms, previous)
        return 0 if reply[0] == "ok" else max(int(reply[1]), 1)

    async def free_lease(self) -> None:
        """Give the lease up (a clean stop)."""
        await self._run("free")

    async def enroll(self) -> Enrolled:
        """Start the position if there is none, and read it with the store's identity."""
        reply = await self._run("enroll", new_id())
        if reply[0] != "ok":
            raise ArchiveRefused("another archiver took the lease")
        retention = str(reply[4])
        return Enrolled(
            str(reply[1]), int(reply[2]), str(reply[3]), int(retention) if retention else 0
        )

    async def advance(
        self,
        expected: str,
        pos: str,
        n: int,
        retention_ms: int,
        settle: dict[str, int],
    ) -> int:
        """Move the position from `expected` to `pos`/`n`; give each settled stream its TTL.

        Returns how many streams got their retention back. Raises ArchiveRefused when the
        position moved under us (another archiver, or a store that went back in time).
        """
        pids = list(settle)
        reply = await self._run(
            "advance",
            expected,
            pos,
            n,
            retention_ms,
            *(settle[pid] for pid in pids),
            streams=[self.keys.stream(pid) for pid in pids],
        )
        if reply[0] == "lost_lease":
            raise ArchiveRefused("the archiver lost its lease; another archiver may be running")
        if reply[0] == "moved":
            raise ArchiveRefused(
                f"the store's archive position is {reply[1] or 'gone'}, not {expected}: "
                "another archiver ran, or the store went back in time"
            )
        return int(reply[1])

    async def note_checkpoint(self, size: int, at_ms: int) -> None:
        """Record the latest checkpoint's size and time for status reports."""
        await self._run("checkpoint", f"{size} {at_ms}")

    async def release(self) -> None:
        """Forget the position: the ledger's retention applies again to every stream."""
        await self._run("release")

    async def next_entries(self, after: str, count: int) -> list[Fetched]:
        """Read up to `count` index entries after `after` and each one's stream entry."""
        try:
            rows = await self.client.xrange(self.keys.index, "(" + after, "+", count=count)
            index = [index_entry_from(item) for item in rows or ()]
            if not index:
                return []
            async with self.client.pipeline(transaction=False) as pipe:
                for item in index:
                    if pid_fits(item.pid) and item.seq > 0:
                        ident = f"0-{item.seq}"
                        pipe.xrange(self.keys.stream(item.pid), ident, ident)
                found = iter(await pipe.execute())
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None
        fetched = []
        for item in index:
            rows = next(found) if pid_fits(item.pid) and item.seq > 0 else []
            entry = stored_entry(item.pid, rows[0]).entry if rows else None
            fetched.append(Fetched(item, entry))
        return fetched

    async def index_ids(self, after: str, upto: str) -> list[str]:
        """The index entry IDs in (after, upto], to tell a crash from a store gone back."""
        try:
            rows = await self.client.xrange(self.keys.index, "(" + after, upto)
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None
        return [text(item[0]) for item in rows or ()]

    async def behind(self, after: str, cap: int) -> tuple[int, int]:
        """How many index entries wait after `after` (at most `cap`) and the oldest one's ms."""
        try:
            rows = await self.client.xrange(self.keys.index, "(" + after, "+", count=cap)
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=False) from None
        rows = list(rows or ())
        oldest = index_entry_from(rows[0]).ms if rows else 0
        return len(rows), oldest

    async def keep_streams(self, persist: bool, retention_ms: int) -> int:
        """PERSIST every stream (an archive starts) or give each its TTL back (it is released)."""
        pids = await BulkReader(self.client, self.keys).stream_pids()
        changed = 0
        try:
            for page in pages(pids, 500):
                async with self.client.pipeline(transaction=False) as pipe:
                    for pid in page:
                        if persist:
                            pipe.persist(self.keys.stream(pid))
                        else:
                            pipe.pexpire(self.keys.stream(pid), retention_ms)
                    changed += sum(bool(done) for done in await pipe.execute())
        except UNREACHABLE:
            raise LedgerUnavailable(maybe_applied=True) from None
        return changed

