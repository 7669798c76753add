"""Results of the guarded mailbox writes and their outcomes.

A failed mutation still says what it knows about its effect: the error carries
one of these results as its `outcome`, attached by `outcome_on_error` at the step that failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from msgspec import UNSET, Struct, UnsetType, field

from schemas.errors import MailError
from schemas.mailbox import Reference

MutationStatus = Literal[
    "copied", "moved", "accepted", "appended", "deleted", "marked_deleted", "unknown", "not_applied"
]

NO_MAPPING_WARNING = (
    "the server gave no destination UID; the source may have changed concurrently; search the "
    "destination folder before acting on the message or retrying"
)
UNCONDITIONAL_WARNING = (
    "the change was applied without a concurrency precondition (the folder has no CONDSTORE "
    "modseq); another client's concurrent change would not have been detected"
)
FLAGS_UNKNOWN_WARNING = (
    "the flag change may or may not have been applied; read the message before any new change"
)
MARKED_DELETED_WARNINGS = [
    "the message was marked \\Deleted but its removal was not confirmed",
    "verify the message is gone before retrying",
    "no mailbox-wide expunge was issued; other \\Deleted messages were not touched",
]


class MutationResult(Struct, kw_only=True, omit_defaults=True):
    """Where a copy, move, trash or delete left the message."""

    source: Reference | UnsetType = UNSET
    destination: Reference | UnsetType = UNSET
    status: MutationStatus
    warnings: list[str] = field(default_factory=list)


class FlagResult(Struct, kw_only=True, omit_defaults=True):
    """The flags after a delta change and whether CONDSTORE protected it."""

    reference: Reference
    flags: list[str]
    modseq: int = 0
    conditional: bool
    warnings: list[str] = field(default_factory=list)


class FolderCreated(Struct):
    """The result of mail_create folder: `created` is false only as an error outcome."""

    created: bool


class FolderRenamed(Struct):
    """The result of mail_modify rename: `renamed` is false only as an error outcome."""

    renamed: bool


def not_applied(source: Reference) -> MutationResult:
    """Return the outcome of a mutation that failed before its command was sent."""
    return MutationResult(source=source, status="not_applied")


def unknown(source: Reference) -> MutationResult:
    """Return the outcome of a mutation whose command was sent and whose effect is unknown."""
    return MutationResult(source=source, status="unknown")


def flag_skeleton(reference: Reference, *warnings: str) -> FlagResult:
    """Return the flag-result skeleton a failed flag change reports as its outcome."""
    return FlagResult(reference=reference, flags=[], conditional=False, warnings=list(warnings))


@contextmanager
def outcome_on_error(outcome: object) -> Iterator[None]:
    """Attach `outcome` to a MailError raised inside, unless an inner step attached its own."""
    try:
        yield
    except MailError as exc:
        if exc.outcome is None:
            exc.outcome = outcome
        raise


# The outcome an action reports when its arguments are refused:
# folder operations say plainly that nothing was created or renamed.
REFUSED_ARGUMENT_OUTCOMES: dict[tuple[str, str], Struct] = {
    ("mail_create", "folder"): FolderCreated(created=False),
    ("mail_modify", "rename"): FolderRenamed(renamed=False),
}
