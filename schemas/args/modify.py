"""Inputs of mail_modify: destructive mailbox changes."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from schemas import rules
from schemas.args.common import Ref
from schemas.args.create import check_destination

SYSTEM_FLAGS = {f.lower(): f for f in ("\\Seen", "\\Answered", "\\Flagged", "\\Draft")}
_KEYWORD = re.compile(r"[A-Za-z0-9$._-]{1,128}")
MAX_MODSEQ = 2**64 - 1


class _Modify(Struct, tag_field="action", forbid_unknown_fields=True):
    """Common base of mail_modify actions."""


class SetFlags(_Modify, tag="flags"):
    """Add or remove selected flags; never replaces the whole set."""

    reference: Ref
    operation: Literal["add", "remove"]
    flags: Annotated[
        list[str],
        Meta(
            description=(
                "\\Seen=read, \\Flagged=starred; \\Answered, \\Draft, keywords ok; not "
                "\\Deleted/\\Recent"
            )
        ),
    ]
    unchanged_since: (
        Annotated[
            int,
            Meta(ge=0, description="observed modseq; needs CONDSTORE; reread on conflict"),
        ]
        | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        self.flags = normalize_flags(self.flags)
        if isinstance(self.unchanged_since, int) and self.unchanged_since > MAX_MODSEQ:
            raise ValueError("flags: unchanged_since must fit in 64 bits")


class Rename(_Modify, tag="rename"):
    """Rename a folder (visible to every client)."""

    old: str
    new: str

    def __post_init__(self) -> None:
        rules.check_folder_name(self.old, "old")
        rules.check_folder_name(self.new, "new")
        if self.old == self.new:
            raise ValueError("rename: old and new must differ")
        if "INBOX" in (self.old.upper(), self.new.upper()):
            raise ValueError("rename: INBOX cannot be renamed or replaced")


class Move(_Modify, tag="move"):
    """Move one message with the server's native MOVE."""

    reference: Ref
    destination: str

    def __post_init__(self) -> None:
        check_destination(self.reference, self.destination)


class Trash(_Modify, tag="trash"):
    """Move one message to the single advertised Trash folder."""

    reference: Ref


def normalize_flags(flags: list[str]) -> list[str]:
    """Check 1-32 flags, canonicalize system flags and drop case-insensitive duplicates."""
    if not 1 <= len(flags) <= 32:
        raise ValueError("flags: give 1-32 flags")
    result: list[str] = []
    seen: set[str] = set()
    for flag in flags:
        if flag.startswith("\\"):
            canonical = SYSTEM_FLAGS.get(flag.lower())
            if canonical is None:
                raise ValueError("flags: only \\Seen, \\Answered, \\Flagged, \\Draft are settable")
        elif _KEYWORD.fullmatch(flag):
            canonical = flag
        else:
            raise ValueError("flags: keywords are 1-128 characters from A-Z a-z 0-9 $ . _ -")
        if canonical.lower() not in seen:
            seen.add(canonical.lower())
            result.append(canonical)
    return result


MODIFY_ACTIONS: tuple[type[_Modify], ...] = (SetFlags, Move, Rename, Trash)
