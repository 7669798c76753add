"""The JSON Graph answers with, as far as angelos reads it: users, folders, messages, errors.

Graph adds members over time, so unknown members are ignored; the ones read here are checked by
type. Every decode is bounded by the response size limit of the request that fetched it.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import Struct, field

from schemas.errors import ServiceUnavailable

T = TypeVar("T")


class EmailAddress(Struct, frozen=True, rename="camel"):
    """Graph's emailAddress: a display name and an address, either possibly missing."""

    name: str | None = None
    address: str | None = None


class Recipient(Struct, frozen=True, rename="camel"):
    """Graph's recipient wrapper around one emailAddress."""

    email_address: EmailAddress = field(default_factory=EmailAddress)


class FollowupFlag(Struct, frozen=True, rename="camel"):
    """Graph's followupFlag; only the status is read."""

    flag_status: str = "notFlagged"


class User(Struct, frozen=True, rename="camel"):
    """`/me` as selected: the identity every operation checks first."""

    id: str
    mail: str | None = None
    user_principal_name: str | None = None


class MailFolder(Struct, frozen=True, rename="camel"):
    """One mailFolder."""

    id: str
    display_name: str = ""
    parent_folder_id: str | None = None
    child_folder_count: int = 0
    is_hidden: bool = False


class Message(Struct, frozen=True, rename="camel"):
    """One message as selected for summaries, reads and writes."""

    id: str
    parent_folder_id: str | None = None
    internet_message_id: str | None = None
    subject: str | None = None
    from_: Recipient | None = field(default=None, name="from")
    to_recipients: list[Recipient] = field(default_factory=list)
    cc_recipients: list[Recipient] = field(default_factory=list)
    reply_to: list[Recipient] = field(default_factory=list)
    received_date_time: str | None = None
    sent_date_time: str | None = None
    is_read: bool = False
    is_draft: bool = False
    flag: FollowupFlag = field(default_factory=FollowupFlag)
    has_attachments: bool = False


class FolderPage(Struct, frozen=True, rename="camel"):
    """One page of a mailFolder collection."""

    value: list[MailFolder]
    next_link: str | None = field(default=None, name="@odata.nextLink")


class MessagePage(Struct, frozen=True, rename="camel"):
    """One page of a message collection."""

    value: list[Message]
    next_link: str | None = field(default=None, name="@odata.nextLink")


class ErrorDetail(Struct, frozen=True, rename="camel"):
    """The `error` object of Graph's error body; only the code is ever read."""

    code: str = ""


class ErrorBody(Struct, frozen=True, rename="camel"):
    """Graph's error body."""

    error: ErrorDetail = field(default_factory=ErrorDetail)


def decode(body: bytes, shape: type[T]) -> T:
    """Decode one answer into `shape`; a malformed one is unavailable (never echoed)."""
    try:
        return msgspec.json.decode(body, type=shape)
    except msgspec.DecodeError:
        pass
    # Raised outside the except block: the decoder's message may quote the answer.
    raise ServiceUnavailable("Microsoft Graph sent an answer angelos cannot read")


def error_code(body: bytes) -> str:
    """The `error.code` of a Graph error body, or "" when there is none."""
    try:
        found: Any = msgspec.json.decode(body, type=ErrorBody)
    except msgspec.DecodeError:
        return ""
    code = found.error.code
    return code if isinstance(code, str) and code.isascii() and len(code) <= 64 else ""
