"""Results of read, read_many and attachment."""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct, UnsetType, field

from schemas.error_object import ErrorObject
from schemas.mailbox import Reference
from schemas.messages import Address, AttachmentMeta
from schemas.search import MessageSummary

SUMMARY_TEXT_BYTES = 4096
FULL_TEXT_HINT = 'Text was clipped for this summary; repeat the read with detail "full".'


class FullMessage(MessageSummary, kw_only=True, omit_defaults=True):
    """A full read: every summary field plus safe headers, text and attachment inventory."""

    headers: dict[str, str]
    text: str
    attachments: list[AttachmentMeta]
    truncated: bool
    warnings: list[str] = field(default_factory=list)


class SummaryRead(Struct, kw_only=True, omit_defaults=True):
    """A summary read: empty lists and maps omitted, text clipped at 4096 bytes."""

    reference: Reference
    subject: str
    from_: list[Address] = field(default_factory=list, name="from")
    to: list[Address] = field(default_factory=list)
    date: str
    flags: list[str]
    size_bytes: int
    modseq: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    text: str
    text_clipped: bool = False
    text_bytes: int = 0
    full_text_hint: str = ""
    attachments: list[AttachmentMeta] = field(default_factory=list)
    truncated: bool
    warnings: list[str] = field(default_factory=list)


ItemStatus = Literal["ok", "error", "not_returned", "not_read"]
StopReason = Literal["response_limit", "message_limit", "cancelled"]


class ReadManyItem(Struct, omit_defaults=True):
    """One input reference's outcome, in input order."""

    reference: Reference
    status: ItemStatus
    message: SummaryRead | FullMessage | UnsetType = UNSET
    error: ErrorObject | UnsetType = UNSET


class ReadManyResult(Struct, omit_defaults=True):
    """A batch read; response_bytes is the exact size of this serialized object."""

    items: list[ReadManyItem]
    max_response_bytes: int
    response_bytes: int
    admitted_message_bytes: int
    next_index: int | UnsetType = UNSET
    stop_reason: StopReason | UnsetType = UNSET


class AttachmentResult(Struct):
    """One attachment's metadata and exact bytes, base64 with padding."""

    reference: Reference
    attachment: AttachmentMeta
    data_base64: str
