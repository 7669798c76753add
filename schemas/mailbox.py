"""Mailbox-side result shapes: folders, server capabilities and message references."""

from __future__ import annotations

from msgspec import UNSET, Struct, UnsetType, field

from schemas.args.common import Ref

# One shape in and out: the reference a result returns is the one a call accepts.
Reference = Ref

# Special-use roles reported in `special_folders`, keyed by the LIST attribute.
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
    """One mailbox from LIST; `delimiter` is "" when the server reports none.

    A Microsoft Graph folder's `name` is its native ID and `display_name` what people see.
    """

    name: str
    delimiter: str
    attributes: list[str] = field(default_factory=list)
    display_name: str | UnsetType = UNSET


class ServerCapabilities(Struct, frozen=True):
    """The `server` object of the capabilities action; the last three are Graph's alone."""

    imap: list[str]
    move: bool
    uid_expunge: bool
    condstore: bool
    special_use: bool
    special_folders: dict[str, list[str]]
    gmail_labels: bool
    permanent_delete: bool
    smtp_stores_sent: bool
    provider: str | UnsetType = UNSET
    supported_flags: list[str] | UnsetType = UNSET
    warnings: list[str] | UnsetType = UNSET
