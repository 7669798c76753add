"""Mailbox-side result shapes: folders, server capabilities and message references."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct, field

UInt32 = Annotated[int, Meta(ge=0, le=4_294_967_295)]

# Special-use roles reported in `special_folders` (tools.md §7.1), keyed by the LIST attribute.
SPECIAL_USE_ROLES: dict[str, str] = {
    "\\ALL": "all",
    "\\ARCHIVE": "archive",
    "\\DRAFTS": "drafts",
    "\\FLAGGED": "flagged",
    "\\JUNK": "junk",
    "\\SENT": "sent",
    "\\TRASH": "trash",
}


class Folder(Struct, frozen=True):
    """One mailbox from LIST (tools.md §5.8); `delimiter` is "" when the server reports none."""

    name: str
    delimiter: str
    attributes: list[str] = field(default_factory=list)


class ServerCapabilities(Struct, frozen=True):
    """The IMAP `server` object of the capabilities action (tools.md §7.1), no Graph fields."""

    imap: list[str]
    move: bool
    uid_expunge: bool
    condstore: bool
    special_use: bool
    special_folders: dict[str, list[str]]
    gmail_labels: bool
    permanent_delete: bool
    smtp_stores_sent: bool


class Reference(Struct, frozen=True, omit_defaults=True):
    """An exact message reference (tools.md §5.1); zero and empty members are omitted."""

    folder: str
    uid_validity: UInt32 = 0
    uid: UInt32 = 0
    provider: str = ""
    account: str = ""
    id: str = ""
