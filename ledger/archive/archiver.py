"""The archiver: every ledger event, in index order and exactly once, into signed segments.

One pass reads the index entries after the position, fetches each one's stream entry, writes
the records, fsyncs them, and only then moves the position in Redis (one script, under the
archiver's lease). A kill between the fsync and the move leaves the archive ahead of Redis:
the next start finds those records' index entries still in the store and moves the position
to them, so nothing is archived twice and nothing is skipped. Records the store no longer
holds, or a position the archive cannot reach, stop the archiver with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import structlog
from msgspec import Struct

from ledger.archive import checkpoint as checkpoint_format
from ledger.archive import records
from ledger.archive.merkle import Frontier, leaf_hash
from ledger.archive.position import NO_POSITION, ArchivePosition, ArchiveRefused, Enrolled
from ledger.archive.segments import ArchiveDamaged, SegmentWriter, Tail, list_checkpoints
from ledger.archive.signed_note import SignerKey, sign
from ledger.ids import new_id
from ledger.store.connection import StoreClient
from ledger.store.keys import LedgerKeys

log = structlog.get_logger("angelos.archive")

ArchivePoint = Literal["fetched", "written", "synced", "advanced", "checkpointed"]
# The fault tests' hook (tests/faults): production appends nothing.
ON_ARCHIVER: Final[list[Callable[[ArchivePoint], None]]] = []

BATCH: Final = 2_000  # index entries per pass
LEASE_MS: Final = 30_000


def origin_of(namespace: str, store_id: str) -> str:
    """Return the checkpoint origin line naming one ledger."""
    return f"angelos.ledger/{namespace}/{store_id}"


class ArchiveSettings(Struct, frozen=True, kw_only=True):
    """Where to archive, the key to sign with, and when to rotate and checkpoint."""

    root: Path
    signer: SignerKey
    segment_bytes: int = 64 * 1024 * 1024
    checkpoint_interval_s: float = 300.0
    recovery_grace_ms: int
    retention_ms: int  # used when the store's meta has not recorded its retention
    mac_key_id: str = ""


class Archiver:
    """Archives one namespace's ledger into one directory; one runs at a time (its lease)."""

    def __init__(self, position: ArchivePosition, keys: LedgerKeys,
                 settings: ArchiveSettings) -> None:
        self.position = position
        self.keys = keys
        self.settings = settings
        self.writer = SegmentWriter(settings.root, settings.segment_bytes)
        self.frontier = Frontier()
        self.pos = NO_POSITION
        self.enrolled: Enrolled | None = None
        self.checkpoint_size = -1
        self.checkpoint_ms = 0
        self._last_checkpoint_at = time.monotonic()
        self._rules: records.RulesRecord | None = None

    @classmethod
    def for_client(cls, client: StoreClient, keys: LedgerKeys,
                   settings: ArchiveSettings) -> Archiver:
        """Build an archiver with a fresh lease token on a redis.asyncio client."""
        return cls(ArchivePosition(client, keys, new_id()), keys, settings)

    async def start(self) -> None:
        """Open the directory, take the lease, and bring Redis and the archive into line."""
        tail: Tail = await asyncio.to_thread(self.writer.open)
        if tail.torn_bytes:
            log.warning("archive_torn_tail_cut", bytes=tail.torn_bytes)
        self.frontier = tail.frontier
        previous = await asyncio.to_thread(self.writer.swap_token, self.position.token)
        held = await self.position.take_lease(LEASE_MS, previous)
        if held:
            raise ArchiveRefused(f"another archiver holds the lease for {held} ms more")
        fresh = await self.position.enroll()
        if not fresh.retention_ms:
            fresh = fresh._replace(retention_ms=self.settings.retention_ms)
        self.enrolled = fresh
        # A full segment is ~90,000 records: decoding them would hold the event loop ~0.3 s.
        archived = await asyncio.to_thread(_decoded, tail.last_lines)
        last_ix = next(
            (r.ix for r in reversed(archived) if not isinstance(r, records.RulesRecord)), None
        )
        self._rules = next(
            (r for r in reversed(archived) if isinstance(r, records.RulesRecord)), None
        )
        if self._rules is not None and self._rules.store_id != fresh.store_id:
            raise ArchiveRefused(
                f"{self.settings.root} archives store {self._rules.store_id}; "
                f"this store is {fresh.store_id}"
            )
        size = self.frontier.size
        if size == fresh.n:
            self.pos = fresh.pos
        elif size > fresh.n:
            await self._catch_up_redis(fresh, last_ix or NO_POSITION, archived)
        else:
            raise ArchiveRefused(
                f"the store says {fresh.n} records were archived, but {self.settings.root} "
                f"holds {size}: the archive lost records (restored from an older copy?)"
            )
        if fresh.pos == NO_POSITION and fresh.n == 0:
            kept = await self.position.keep_streams(True, 0)
            log.info("archive_started", streams_kept=kept)
        self.checkpoint_size = self._latest_checkpoint_size()

    async def _catch_up_redis(
        self, fresh: Enrolled, last_ix: str, archived: list[records.Record]
    ) -> None:
        """The archive is ahead of Redis: a kill after the fsync, or a store gone back."""
        behind = self.frontier.size - fresh.n
        tail = archived[len(archived) - behind :] if behind <= len(archived) else None
        if tail is None:
            raise ArchiveRefused("the archive is ahead of the store by more than one segment")
        expected = [r.ix for r in tail if not isinstance(r, records.RulesRecord)]
        if expected and await self.position.index_ids(fresh.pos, last_ix) != expected:
            raise ArchiveRefused(
                "archived events are gone from the store's index: the store went back in "
                "time; run `angelos ledger verify --archive` against it to name them"
            )
        settle = {r.pid: int(r.id.partition("-")[2] or 0) for r in tail
                  if isinstance(r, records.EventRecord)}
        new_pos = last_ix if expected else fresh.pos
        await self.position.advance(
            fresh.pos, new_pos, self.frontier.size, fresh.retention_ms, settle
        )
        log.info("archive_position_caught_up", records=behind)
        self.pos = new_pos

    def _latest_checkpoint_size(self) -> int:
        found = list_checkpoints(self.settings.root)
        return found[-1][0] if found else -1

    def _rules_record(self, n: int) -> records.RulesRecord:
        assert self.enrolled is not None
        return records.RulesRecord(
            n=n,
            namespace=self.keys.namespace,
            store_id=self.enrolled.store_id,
            mac_key_id=self.settings.mac_key_id,
            retention_ms=self.enrolled.retention_ms,
            recovery_grace_ms=self.settings.recovery_grace_ms,
            archived_ms=int(time.time() * 1000),
        )

    async def run_once(self) -> int:
        """Archive the next batch; return how many index entries it took (0: caught up)."""
        assert self.enrolled is not None
        held = await self.position.take_lease(LEASE_MS)
        if held:
            raise ArchiveRefused("the archiver lost its lease; another archiver may be running")
        fetched = await self.position.next_entries(self.pos, BATCH)
        _point("fetched")
        lines: list[bytes] = []
        n = self.frontier.size
        rotate = self.writer.needs_rotation
        if rotate or self._rules_changed():
            if rotate and self.writer.current is not None:
                await self.checkpoint()
            rules = self._rules_record(n)
            self._rules = rules
            lines.append(records.encode(rules))
            n += 1
        if not fetched and not lines:
            await self._maybe_checkpoint()
            return 0
        settle: dict[str, int] = {}
        for item in fetched:
            index = item.item
            record: records.Record
            if item.entry is None:
                record = records.MissingRecord(
                    n=n, ix=index.id, pid=index.pid, seq=index.seq, t=index.t, h=index.h
                )
            else:
                record = records.event_record(n, index.id, item.entry, index.h)
                settle[index.pid] = index.seq
            lines.append(records.encode(record))
            n += 1
        await asyncio.to_thread(self._write, lines, rotate)
        hashes = [leaf_hash(line) for line in lines]
        new_pos = fetched[-1].item.id if fetched else self.pos
        await self.position.advance(
            self.pos, new_pos, n, self.enrolled.retention_ms, settle
        )
        for digest in hashes:
            self.frontier.append(digest)
        self.pos = new_pos
        _point("advanced")
        await self._maybe_checkpoint()
        return len(fetched)

    def _rules_changed(self) -> bool:
        if self._rules is None:
            return True
        fresh = self._rules_record(self._rules.n)
        return (fresh.retention_ms, fresh.recovery_grace_ms, fresh.mac_key_id) != (
            self._rules.retention_ms, self._rules.recovery_grace_ms, self._rules.mac_key_id
        )

    def _write(self, lines: list[bytes], rotate: bool) -> None:
        if rotate:
            self.writer.start_segment(self.frontier.size)
        self.writer.append(lines)
        _point("written")
        self.writer.sync()
        _point("synced")

    async def _maybe_checkpoint(self) -> None:
        due = time.monotonic() - self._last_checkpoint_at >= self.settings.checkpoint_interval_s
        if due:
            await self.checkpoint()

    async def checkpoint(self) -> None:
        """Sign and write a checkpoint of the tree as archived so far (skipped when unchanged)."""
        self._last_checkpoint_at = time.monotonic()
        size = self.frontier.size
        if size == self.checkpoint_size or size == 0:
            return
        assert self.enrolled is not None
        body = checkpoint_format.render(
            checkpoint_format.Checkpoint(
                origin_of(self.keys.namespace, self.enrolled.store_id), size, self.frontier.root()
            )
        )
        note = sign(body, self.settings.signer)
        await asyncio.to_thread(self.writer.write_checkpoint, size, note)
        self.checkpoint_size = size
        self.checkpoint_ms = int(time.time() * 1000)
        await self.position.note_checkpoint(size, self.checkpoint_ms)
        _point("checkpointed")
        log.info("archive_checkpoint", size=size)

    async def run(self, stop: asyncio.Event, idle_s: float = 0.5) -> None:
        """Archive until `stop` is set, pausing `idle_s` whenever it has caught up."""
        while not stop.is_set():
            if await self.run_once() == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle_s)

    async def close(self) -> None:
        """Checkpoint what was archived, give the lease up and close the directory."""
        try:
            if self.enrolled is not None:
                await self.checkpoint()
                await self.position.free_lease()
        finally:
            await asyncio.to_thread(self.writer.close)


def _decoded(lines: list[bytes]) -> list[records.Record]:
    return [records.decode(line) for line in lines]


def _point(name: ArchivePoint) -> None:
    for hook in ON_ARCHIVER:
        hook(name)


__all__ = ["ArchiveDamaged", "ArchiveRefused", "ArchiveSettings", "Archiver", "origin_of"]
