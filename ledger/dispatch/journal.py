"""The closer's journal: closing events owed to the ledger survive a restart of this process.

One directory per ledger (namespace and store id) in the data directory; in it each process
keeps one JSON Lines file, named after its dispatcher id and locked while it lives: `open`
lines carry an intent, `done` lines its event id. A process that starts adopts the files of
processes that are gone (their lock is free): it copies what they still owed into its own file,
retries it, and deletes theirs. Only the failure path writes here; a healthy store never sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
from typing import Final

import msgspec
import structlog

from ledger.dispatch.closer import CloseIntent

log = structlog.get_logger("angelos.ledger.journal")
DIRECTORY: Final = "ledger-journal"
_NAME: Final = re.compile(r"[0-9a-f]{32}\.jsonl", re.ASCII)
_LEDGER: Final = re.compile(r"[a-z0-9-]{1,32}-[0-9a-f]{32}", re.ASCII)


class Journal:
    """This process's journal file, locked while it lives."""

    def __init__(self, directory: str, dispatcher_id: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"{dispatcher_id}.jsonl")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh id: never contended
        self._open: set[str] = set()
        self._lock = asyncio.Lock()

    @classmethod
    def open(cls, data_dir: str, ledger: str, dispatcher_id: str) -> Journal:
        """Open this process's journal of one ledger (`<namespace>-<store id>`)."""
        if _LEDGER.fullmatch(ledger) is None:
            raise ValueError("the journal needs a ledger name of namespace and store id")
        directory = os.path.join(data_dir, DIRECTORY, ledger)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return cls(directory, dispatcher_id)

    async def add(self, intent: CloseIntent) -> None:
        """Keep an intent (fsynced) until `done` is called for it."""
        self._open.add(intent.eid)
        line = b'{"open":' + intent.to_json() + b"}\n"
        await self._write(line)

    async def done(self, intent: CloseIntent) -> None:
        """Forget an intent that landed or that nothing is owed for any more."""
        self._open.discard(intent.eid)
        await self._write(msgspec.json.encode({"done": intent.eid}) + b"\n")

    async def adopt(self) -> list[CloseIntent]:
        """Take over what processes that are gone still owed: copied into this process's file,
        then their files deleted (an intent adopted twice lands once: it keeps its event id)."""
        adopted: list[CloseIntent] = []
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if path == self.path or _NAME.fullmatch(name) is None:
                continue
            taken = _take(path)
            if taken is None:
                continue  # its process is alive
            fd, owed = taken
            try:
                for intent in owed:
                    await self.add(intent)
                with contextlib.suppress(OSError):
                    os.unlink(path)
            finally:
                os.close(fd)
            adopted += owed
        return adopted

    def close(self) -> None:
        """Release the file; delete it when nothing is owed."""
        if not self._open:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        os.close(self._fd)

    async def _write(self, line: bytes) -> None:
        async with self._lock:
            try:
                await asyncio.to_thread(_append, self._fd, line)
            except OSError as exc:  # the intent is still retried in memory
                log.error("send_journal_write_failed", error=type(exc).__name__)


def _append(fd: int, line: bytes) -> None:
    os.write(fd, line)
    os.fsync(fd)


def _take(path: str) -> tuple[int, list[CloseIntent]] | None:
    """Lock and read a dead process's journal: (its locked fd, what it still owed), or None
    when its owner is alive."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        size = os.fstat(fd).st_size
        raw = os.pread(fd, size, 0)
    except OSError:
        os.close(fd)
        return None
    owed: dict[str, CloseIntent] = {}
    for line in raw.splitlines():
        try:
            record = msgspec.json.decode(line)
            if "open" in record:
                intent = CloseIntent.from_json(msgspec.json.encode(record["open"]))
                owed[intent.eid] = intent
            elif "done" in record:
                owed.pop(str(record["done"]), None)
        except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError):
            log.error("send_journal_line_unreadable", file=os.path.basename(path))
    return fd, list(owed.values())
