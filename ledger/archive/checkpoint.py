"""The c2sp.org/tlog-checkpoint note body: origin, tree size, root hash and extension lines."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Final

ROOT_SIZE: Final = 32
# Tree sizes are 64-bit in RFC 9162 and in every checkpoint reader we know of.
MAX_SIZE: Final = 2**64 - 1


class CheckpointError(ValueError):
    """A checkpoint body, or a checkpoint to render, that c2sp.org/tlog-checkpoint forbids."""


@dataclass(frozen=True)
class Checkpoint:
    """One signed tree head: who logs (origin), how many leaves, their root, opaque extensions."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "the origin")
        if not isinstance(self.size, int) or isinstance(self.size, bool):
            raise CheckpointError(f"the tree size must be an integer, not {self.size!r}")
        if not 0 <= self.size <= MAX_SIZE:
            raise CheckpointError(f"the tree size {self.size} is not a 64-bit count")
        if not isinstance(self.root, bytes) or len(self.root) != ROOT_SIZE:
            raise CheckpointError("the root hash must be 32 bytes")
        if not isinstance(self.extensions, tuple):
            raise CheckpointError("the extension lines must be a tuple of str")
        for n, line in enumerate(self.extensions, start=1):
            _check_line(line, f"extension line {n}")


def render(cp: Checkpoint) -> bytes:
    """Return the note body of `cp`: one newline-terminated line per field, extensions last."""
    lines = [cp.origin, str(cp.size), base64.b64encode(cp.root).decode("ascii"), *cp.extensions]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def parse(body: bytes) -> Checkpoint:
    """Read a checkpoint note body strictly, raising CheckpointError with the first problem."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError("the checkpoint is not UTF-8") from None
    if not text.endswith("\n"):
        raise CheckpointError("the checkpoint must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError("a checkpoint has at least three lines: origin, size, root hash")
    origin, size, root_b64, *extensions = lines
    # The size and root are checked before the Checkpoint's own checks name the other lines.
    if not size or not size.isascii() or not size.isdigit():
        raise CheckpointError(f"the tree size {size!r} is not an ASCII decimal")
    if size != "0" and size.startswith("0"):
        raise CheckpointError(f"the tree size {size!r} has a leading zero")
    if len(size) > len(str(MAX_SIZE)):
        raise CheckpointError(f"the tree size {size!r} is not a 64-bit count")
    return Checkpoint(origin, int(size), _root(root_b64), tuple(extensions))


def _root(line: str) -> bytes:
    try:
        raw = base64.b64decode(line.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise CheckpointError(f"the root hash {line!r} is not standard base64") from None
    # b64decode accepts set bits after the last symbol; only one spelling of 32 bytes is valid.
    if base64.b64encode(raw).decode("ascii") != line:
        raise CheckpointError(f"the root hash {line!r} is not canonical base64")
    if len(raw) != ROOT_SIZE:
        raise CheckpointError(f"the root hash is {len(raw)} bytes, not 32")
    return raw


def _check_line(line: object, what: str) -> None:
    if not isinstance(line, str):
        raise CheckpointError(f"{what} must be a str")
    if not line:
        raise CheckpointError(f"{what} must not be empty")
    if any(ch < " " for ch in line):
        raise CheckpointError(f"{what} holds a control character")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        raise CheckpointError(f"{what} is not encodable as UTF-8") from None
