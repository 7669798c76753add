"""The rollback witness: the highest ledger clock seen on this host, kept outside Redis.

Every lifecycle event advances the ledger's clock in Redis (`meta.clock`). A process notes each
clock it is answered with, and before it writes a send's end-of-data marker it makes sure the
witness file holds at least the clock of that send's commit point, fsynced. A store that later
answers with a lower clock has forgotten acknowledged writes, perhaps the claim or the commit
point of a message that was submitted; the scripts then record a halt (ledger/store/lua/
common.lua) and nothing is claimed until a person acknowledges. Earlier steps need no fsync of
their own: a send forgotten before its commit point was never submitted, and the commit point
of the one dispatch that can still reach it is fenced by compare-and-append.

One file per ledger (namespace and store id) in the data directory, shared by every process
of the host that uses it: writers take an exclusive lock and keep the larger value, readers
read without a lock and check the record's checksum.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import zlib
from typing import Final

import structlog

log = structlog.get_logger("angelos.ledger.witness")
_RECORD: Final = re.compile(rb"angelos-witness 1 (\d{1,16}) ([0-9a-f]{8})\n")
_ID: Final = re.compile(r"[0-9a-f]{32}", re.ASCII)
_NAMESPACE: Final = re.compile(r"[a-z0-9-]{1,32}", re.ASCII)
DIRECTORY: Final = "ledger-witness"


class WitnessError(Exception):
    """The witness file cannot be kept; sending must stay off (fail closed)."""


def _record(clock: int) -> bytes:
    digits = str(clock).encode()
    return b"angelos-witness 1 %s %08x\n" % (digits, zlib.crc32(digits))


def _parse(raw: bytes) -> int | None:
    match = _RECORD.fullmatch(raw)
    if match is None or int(match.group(2), 16) != zlib.crc32(match.group(1)):
        return None
    return int(match.group(1))


class Witness:
    """This host's witness of one ledger: `saw` notes a clock, `keep` makes it durable first."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise WitnessError("the rollback witness file cannot be opened") from exc
        self._seen = 0  # the highest clock noted in memory
        self._durable = self._read() or 0  # the highest value known to be on disk
        self._lock = asyncio.Lock()

    @classmethod
    def open(cls, data_dir: str, namespace: str, store_id: str) -> Witness:
        """Open (or create) the witness of one ledger under `data_dir`."""
        if _NAMESPACE.fullmatch(namespace) is None or _ID.fullmatch(store_id) is None:
            raise WitnessError("the ledger has no valid namespace or store id")
        if not data_dir:
            raise WitnessError("no data directory is configured for the rollback witness")
        directory = os.path.join(data_dir, DIRECTORY)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise WitnessError("the rollback witness directory cannot be created") from exc
        return cls(os.path.join(directory, f"{namespace}-{store_id}"))

    @classmethod
    def existing(cls, data_dir: str, namespace: str, store_id: str) -> Witness | None:
        """Open the witness only if this host already keeps one for that ledger."""
        if not data_dir or _NAMESPACE.fullmatch(namespace) is None:
            return None
        if _ID.fullmatch(store_id) is None:
            return None
        path = os.path.join(data_dir, DIRECTORY, f"{namespace}-{store_id}")
        return cls(path) if os.path.exists(path) else None

    def floor(self, *, shared: bool = True) -> int:
        """Return the highest clock known here: noted in memory, or (`shared`) on disk by any
        process of this host, which costs a read of the file."""
        mine = max(self._seen, self._durable)
        return max(mine, self._read() or 0) if shared else mine

    def saw(self, clock: int) -> None:
        """Note a clock the store answered with (in memory; `keep` makes it durable)."""
        self._seen = max(self._seen, clock)

    async def keep(self, clock: int) -> None:
        """Return once the file holds at least `clock` (and everything noted), fsynced.

        Concurrent callers share one write: whoever holds the lock writes the highest clock noted
        so far, so the callers queued behind it usually find their clock already durable.
        """
        self.saw(clock)
        if self._durable >= clock:
            return
        async with self._lock:
            if self._durable >= clock:
                return
            target = self._seen
            try:
                self._durable = await asyncio.to_thread(self._write, target)
            except OSError as exc:
                log.error("ledger_witness_write_failed", error=type(exc).__name__)
                raise WitnessError("the rollback witness could not be written") from exc

    def close(self) -> None:
        """Close the file (the record stays for the next process)."""
        os.close(self._fd)

    def _read(self) -> int | None:
        # A reader may meet a write in progress; the checksum tells, and memory covers the gap.
        try:
            return _parse(os.pread(self._fd, 64, 0))
        except OSError:
            return None

    def _write(self, clock: int) -> int:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            value = max(clock, self._read() or 0)
            record = _record(value)
            os.pwrite(self._fd, record, 0)
            os.ftruncate(self._fd, len(record))
            os.fsync(self._fd)
            return value
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
