"""Inputs of mail_create: additive mailbox writes."""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, Struct, UnsetType

from schemas import rules
from schemas.args.common import Hex64, Message, Ref

SourceDigest = Annotated[Hex64, Meta(description="from mail_query draft, same reference")]
Changes = Annotated[
    Message,
    Meta(
        description=(
            "Patch: omitted fields kept, empty clears, attachments replaces all; body edits "
            "set or clear both text and html if both exist."
        )
    ),
]


class _Create(Struct, tag_field="action", forbid_unknown_fields=True):
    """Common base of mail_create actions."""


class CreateFolder(_Create, tag="folder"):
    """Create a folder."""

    name: str

    def __post_init__(self) -> None:
        rules.check_folder_name(self.name, "name")


class Copy(_Create, tag="copy"):
    """Copy one message to another folder."""

    reference: Ref
    destination: str

    def __post_init__(self) -> None:
        check_destination(self.reference, self.destination)


class SaveDraft(_Create, tag="draft"):
    """Append a new draft."""

    message: Message
    folder: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.folder, str) and self.folder:
            rules.check_folder_name(self.folder)


class ReviseDraft(_Create, tag="revise_draft"):
    """Append a revised copy of a saved draft; the original stays."""

    reference: Ref
    source_digest: SourceDigest
    changes: Changes
    folder: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        rules.check_hex(self.source_digest, 64, "source_digest")  # the pattern lets "\n" end it
        if not self.changes.present():
            raise ValueError(
                "revise_draft: changes must name at least one field; omit a field to keep it"
            )
        if isinstance(self.folder, str) and self.folder:
            rules.check_folder_name(self.folder)


def check_destination(source: Ref, destination: str) -> None:
    """Require a valid destination folder different from the source folder."""
    rules.check_folder_name(destination, "destination")
    if destination == source.folder or (
        destination.upper() == "INBOX" and source.folder.upper() == "INBOX"
    ):
        raise ValueError("destination must differ from the source folder")


CREATE_ACTIONS: tuple[type[_Create], ...] = (Copy, SaveDraft, CreateFolder, ReviseDraft)
