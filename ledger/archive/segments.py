"""The archive directory: rotated segment files of records and the signed checkpoints.

    DIR/segments/<first leaf, 20 digits>.jsonl   one record per line, append-only
    DIR/checkpoints/<tree size, 20 digits>.note  a C2SP signed checkpoint per closed segment
                                                 and per interval
    DIR/.lock                                    held (flock) by the one archiver writing here

Blocking file work (writes, fsync, reading segments back) runs in a worker thread: the callers
here are sync functions the archiver hands to `asyncio.to_thread`.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

from ledger.archive.merkle import Frontier, leaf_hash

SEGMENTS: Final = "segments"
CHECKPOINTS: Final = "checkpoints"
_DIGITS: Final = 20


class ArchiveDamaged(Exception):
    """The directory does not continue itself (a gap, a stray file); the archiver stops."""


class Segment(NamedTuple):
    """One segment file and the leaf index of its first record."""

    first: int
    path: Path


def segment_name(first: int) -> str:
    """Return the file name of the segment whose first record is leaf `first`."""
    return f"{first:0{_DIGITS}d}.jsonl"


def checkpoint_name(size: int) -> str:
    """Return the file name of the checkpoint of tree size `size`."""
    return f"{size:0{_DIGITS}d}.note"


def list_segments(root: Path) -> list[Segment]:
    """Every segment file in leaf order; a name that is not a segment's is damage."""
    folder = root / SEGMENTS
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        stem = path.name.removesuffix(".jsonl")
        if len(stem) != _DIGITS or not stem.isdigit() or path.suffix != ".jsonl":
            raise ArchiveDamaged(f"{path.name} in {SEGMENTS}/ is not a segment file")
        found.append(Segment(int(stem), path))
    return sorted(found)


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Every checkpoint file as (tree size, path), smallest first."""
    folder = root / CHECKPOINTS
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        stem = path.name.removesuffix(".note")
        if len(stem) == _DIGITS and stem.isdigit() and path.suffix == ".note":
            found.append((int(stem), path))
    return sorted(found)


def lines_of(data: bytes) -> tuple[list[bytes], int]:
    """Split a segment's bytes into whole lines and the length of a torn tail (no newline)."""
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], len(data) - end


class Tail(NamedTuple):
    """What the directory holds: its tree so far, the last lines and any torn tail cut."""

    frontier: Frontier
    last_lines: list[bytes]  # the lines of the last segment
    torn_bytes: int


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SegmentWriter:
    """Appends records to the newest segment, rotates it by size, and fsyncs on request."""

    def __init__(self, root: Path, segment_bytes: int) -> None:
        self.root = root
        self.segment_bytes = segment_bytes
        self._lock_fd = -1
        self._file: int = -1
        self._size = 0
        self.current: Segment | None = None

    def open(self) -> Tail:
        """Lock the directory, cut a torn tail off the last segment and read the tree so far."""
        for sub in ("", SEGMENTS, CHECKPOINTS):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock_fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise ArchiveDamaged(f"another archiver is writing to {self.root}") from None
        frontier = Frontier()
        last_lines: list[bytes] = []
        torn = 0
        segments = list_segments(self.root)
        for number, segment in enumerate(segments):
            data = segment.path.read_bytes()
            lines, torn_here = lines_of(data)
            last = number == len(segments) - 1
            if torn_here and not last:
                raise ArchiveDamaged(f"segment {segment.path.name} ends inside a record")
            if segment.first != frontier.size:
                raise ArchiveDamaged(
                    f"segment {segment.path.name} starts at leaf {segment.first}, "
                    f"but the segments before it end at {frontier.size}"
                )
            for line in lines:
                frontier.append(leaf_hash(line))
            if last:
                last_lines, torn = lines, torn_here
                if torn:  # never fsynced as a whole record, never counted: cut it
                    with open(segment.path, "r+b") as handle:
                        handle.truncate(len(data) - torn)
                        os.fsync(handle.fileno())
                self._reopen(segment, len(data) - torn)
        return Tail(frontier, last_lines, torn)

    def swap_token(self, token: str) -> str:
        """Record this archiver's lease token in the locked directory; return the one before.

        Only the holder of the directory lock calls this, so the token read back belonged to
        an archiver of this directory that has died: its Redis lease may be taken over.
        """
        path = self.root / "lease-token"
        try:
            previous = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            previous = ""
        path.write_text(token + "\n", encoding="ascii")
        return previous

    def _reopen(self, segment: Segment, size: int) -> None:
        self._file = os.open(segment.path, os.O_WRONLY | os.O_APPEND)
        self.current = segment
        self._size = size

    @property
    def needs_rotation(self) -> bool:
        """Say whether the current segment is full (or there is none yet)."""
        return self.current is None or self._size >= self.segment_bytes

    def start_segment(self, first: int) -> None:
        """Close the current segment and start the next one at leaf `first`."""
        self.close_file()
        segment = Segment(first, self.root / SEGMENTS / segment_name(first))
        fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        _fsync_dir(self.root / SEGMENTS)
        self._reopen(segment, 0)

    def append(self, lines: list[bytes]) -> None:
        """Write whole lines to the current segment (not yet durable: call `sync`)."""
        data = b"".join(line + b"\n" for line in lines)
        view = memoryview(data)
        while view:
            written = os.write(self._file, view)
            view = view[written:]
        self._size += len(data)

    def sync(self) -> None:
        """Make everything written so far durable."""
        if self._file >= 0:
            os.fsync(self._file)

    def write_checkpoint(self, size: int, note: bytes) -> Path:
        """Write a signed checkpoint durably (temporary file, fsync, rename, directory fsync)."""
        folder = self.root / CHECKPOINTS
        final = folder / checkpoint_name(size)
        temporary = folder / (final.name + ".tmp")
        with open(temporary, "wb") as handle:
            handle.write(note)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)
        _fsync_dir(folder)
        return final

    def close_file(self) -> None:
        """Fsync and close the current segment file."""
        if self._file >= 0:
            os.fsync(self._file)
            os.close(self._file)
            self._file = -1

    def close(self) -> None:
        """Close the segment and release the directory lock."""
        self.close_file()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def read_records(root: Path) -> Iterator[tuple[Segment, list[bytes], int]]:
    """Yield each segment with its whole lines and the length of its torn tail, in order."""
    for segment in list_segments(root):
        lines, torn = lines_of(segment.path.read_bytes())
        yield segment, lines, torn
