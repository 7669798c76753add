"""Message shapes produced by the MIME reading layer: addresses, attachments, parsed messages."""

from __future__ import annotations

from datetime import datetime

from msgspec import Struct, field

# The header keys a read may expose, in display order; Bcc is never one of them.
SAFE_HEADER_KEYS: tuple[str, ...] = (
    "From",
    "To",
    "Cc",
    "Reply-To",
    "Subject",
    "Date",
    "Message-Id",
    "In-Reply-To",
    "References",
)


class Address(Struct, frozen=True, omit_defaults=True, kw_only=True):
    """One mailbox of an address list; `name` is omitted when empty."""

    name: str = ""
    address: str


class AttachmentMeta(Struct, frozen=True, omit_defaults=True, kw_only=True):
    """One attachment in MIME walk order; `filename` is omitted when empty."""

    index: int
    filename: str = ""
    content_type: str
    size_bytes: int


class ParsedMessage(Struct, kw_only=True):
    """What the MIME reader made of one raw message: safe headers, text, attachment inventory.

    `truncated` reports incomplete source or MIME data (never presentation clipping) and
    `warnings` say why; `html_derived` tells that `text` was extracted from HTML.
    """

    headers: dict[str, str] = field(default_factory=dict)
    subject: str = ""
    from_: list[Address] = field(default_factory=list, name="from")
    to: list[Address] = field(default_factory=list)
    cc: list[Address] = field(default_factory=list)
    reply_to: list[Address] = field(default_factory=list)
    date: datetime | None = None
    message_id: str = ""
    text: str = ""
    html_derived: bool = False
    attachments: list[AttachmentMeta] = field(default_factory=list)
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
