"""Composition shapes: what mail_prepare composes from, what it produces, and the preview.

`SourceMessage` is filled by the service from an exact read; `ComposedMessage` is the private
payload (wire bytes, envelope, digest); the `*Preview` Structs are the mail_prepare results
, always complete and never clipped.
"""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct, UnsetType, field

from schemas.mailbox import Reference
from schemas.messages import AttachmentMeta

OriginalMode = Literal["quoted", "eml", "none"]

CONFIRMATION_TEXT = (
    "Show the owner this exact message (sender, recipients including Bcc, subject, text, HTML "
    "and attachments) and get their approval before calling mail_send_confirmed with this "
    "prepared_id and digest. Any change needs a new mail_prepare."
)


class Identity(Struct, frozen=True, kw_only=True):
    """The configured sender and every address that counts as the owner for reply derivation."""

    sender: str
    self_addresses: tuple[str, ...] = ()


class SourceMessage(Struct, kw_only=True):
    """What composition needs from an already-read reply or forward source.

    `raw` is the complete raw message as read (at least its whole header block; eml mode
    attaches it); `text` is the decoded plain text of the read; `warnings` are the read's own.
    """

    reference: Reference
    raw: bytes
    text: str = ""
    truncated: bool = False
    attachments: list[AttachmentMeta] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class FetchedAttachment(Struct, frozen=True, kw_only=True):
    """One selected source attachment as re-read for a forward: its metadata and decoded bytes."""

    meta: AttachmentMeta
    data: bytes


class AttachmentSummary(Struct, frozen=True):
    """One outgoing file as the preview shows it; `sha256` is of the decoded bytes."""

    filename: str
    content_type: str
    bytes: int
    sha256: str


class SourceExtras(Struct, kw_only=True):
    """What a reply or forward adds to its preparation."""

    source: Reference
    source_message_id: str
    quote_original: bool
    original_mode: OriginalMode
    attachment_indexes: list[int] = field(default_factory=list)
    included_source_attachments: list[AttachmentMeta] = field(default_factory=list)
    omitted_source_attachments: list[AttachmentMeta] = field(default_factory=list)
    source_attachments_in_eml: list[AttachmentMeta] | None = None


class ComposedMessage(Struct, kw_only=True):
    """A finished composition: exact wire bytes, SMTP envelope, review fields and digest.

    `raw` never holds a Bcc header; `recipients` is the envelope (To, Cc, Bcc after dedup);
    `to`/`cc`/`bcc` are header forms; `text`/`html` use LF newlines.
    """

    prepared_id: str
    raw: bytes
    envelope_from: str
    recipients: list[str]
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    text: str
    html: str
    attachments: list[AttachmentSummary]
    message_id: str
    in_reply_to: str
    references: list[str]
    warnings: list[str]
    digest: str
    transport: Literal["smtp", "microsoft_graph"] = "smtp"
    extras: SourceExtras | None = None


class PreparePreview(Struct, kw_only=True):
    """The complete preview every mail_prepare success returns."""

    prepared_id: str
    digest: str
    from_: str = field(name="from")
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    text: str
    html: str
    warnings: list[str]
    attachments: list[AttachmentSummary]
    message_id: str
    expires_at: str
    encoded_bytes: int
    status: Literal["prepared"] = "prepared"
    confirmation: str = CONFIRMATION_TEXT
    # The owner's passkey approval page, when the send needs an approval a passkey can give
    # and the first-party authorization server is on.
    approval_url: str | UnsetType = UNSET


class SourcedPreparePreview(PreparePreview, kw_only=True):
    """The preview of a reply, reply_all or forward, with its source and threading."""

    source: Reference
    source_message_id: str
    in_reply_to: str
    references: list[str]
    quote_original: bool
    original_mode: OriginalMode
    attachment_indexes: list[int]
    included_source_attachments: list[AttachmentMeta]
    omitted_source_attachments: list[AttachmentMeta]
    source_attachments_in_eml: list[AttachmentMeta] | UnsetType = UNSET


class DraftPreparePreview(PreparePreview, kw_only=True):
    """The preview of a prepared saved draft."""

    source_reference: Reference
    source_digest: str
    in_reply_to: str
    references: list[str]
    original_retained: bool = True
