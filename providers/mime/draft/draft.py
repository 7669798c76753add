"""Saved drafts as editable structures: all or error.

`read_draft` turns raw draft bytes into the composition fields they were built from, or raises
UnsupportedOperation naming why the draft is outside the supported subset; it never returns a
partial draft. `source_digest` binds the exact raw bytes an agent reviewed.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime

from msgspec import UNSET, Struct, field, structs

from providers.mime.compose import limits
from providers.mime.compose.addresses import Mailbox, ascii_lower, header_form
from providers.mime.compose.new import build_draft_bytes, compose_draft
from providers.mime.draft.draft_body import DraftFile, parse_body
from providers.mime.draft.draft_headers import (
    OUTER_FIELDS,
    DraftUnsupported,
    check_date,
    check_mime_version,
    decode_subject,
    header_block,
    mailbox_list,
    message_id,
    reference_chain,
    single_mailbox,
)
from schemas.args.common import AttachmentIn, Message
from schemas.compose import Identity
from schemas.errors import InvalidArguments, OperationFailed, SafetyLimit

_PROBE_ID = "0" * 32
_PROBE_TIME = datetime(2000, 1, 1, tzinfo=UTC)


class ParsedDraft(Struct, kw_only=True):
    """A draft inside the supported subset: sender, recipients, bodies, files and threading."""

    sender: Mailbox
    message_id: str = ""
    to: list[Mailbox] = field(default_factory=list)
    cc: list[Mailbox] = field(default_factory=list)
    bcc: list[Mailbox] = field(default_factory=list)
    subject: str = ""
    text: str = ""
    html: str = ""
    has_plain: bool = False
    attachments: list[DraftFile] = field(default_factory=list)
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)

    def message(self) -> Message:
        """The composition object this draft rebuilds from (empty members omitted)."""
        files = [
            AttachmentIn(f.filename, f.content_type, base64.b64encode(f.data).decode("ascii"))
            for f in self.attachments
        ]
        return Message(
            to=[header_form(m) for m in self.to] or UNSET,
            cc=[header_form(m) for m in self.cc] or UNSET,
            bcc=[header_form(m) for m in self.bcc] or UNSET,
            subject=self.subject,
            text=self.text,
            html=self.html or UNSET,
            attachments=files or UNSET,
            in_reply_to=self.in_reply_to or UNSET,
            references=list(self.references) or UNSET,
        )

    def sender_form(self) -> str:
        """The draft's From in header form, e.g. `<alice@example.test>`."""
        return header_form(self.sender)

    def sent_by(self, sender: str) -> bool:
        """Tell whether the draft's From is `sender` (ASCII case-insensitive)."""
        return ascii_lower(self.sender.address) == ascii_lower(sender)


def source_digest(raw: bytes) -> str:
    """SHA-256 hex of the complete raw draft bytes."""
    return hashlib.sha256(raw).hexdigest()


def parse_draft(raw: bytes) -> ParsedDraft:
    """Parse raw draft bytes strictly; raise DraftUnsupported or SafetyLimit."""
    if len(raw) > limits.MAX_MESSAGE_BYTES:
        raise SafetyLimit("the draft is larger than 5 MiB")
    fields, body_start = header_block(raw, 0, len(raw), OUTER_FIELDS)
    if "from" not in fields:
        raise DraftUnsupported("From is missing")
    draft = ParsedDraft(sender=single_mailbox(fields["from"]))
    for name in ("to", "cc", "bcc"):
        if name in fields:
            setattr(draft, name, mailbox_list(fields[name], name.capitalize()))
    draft.subject = decode_subject(fields.get("subject", ""))
    if "date" in fields:
        check_date(fields["date"])
    if "mime-version" in fields:
        check_mime_version(fields["mime-version"])
    if "message-id" in fields:
        draft.message_id = message_id(fields["message-id"], "Message-Id")
    if fields.get("in-reply-to"):
        draft.in_reply_to = message_id(fields["in-reply-to"], "In-Reply-To")
    draft.references = reference_chain(fields.get("references", ""))
    body = parse_body(raw, fields, body_start, len(raw))
    draft.text, draft.html, draft.has_plain = body.text, body.html, body.has_plain
    draft.attachments = body.attachments
    return draft


def check_rebuildable(draft: ParsedDraft) -> None:
    """Refuse a draft whose content the composition validator would not rebuild."""
    try:
        composed = compose_draft(
            draft.message(),
            identity=Identity(sender=draft.sender.address),
            draft_id=_PROBE_ID,
            created_at=_PROBE_TIME,
            keep_empty_text=draft.has_plain,
        )
        build_draft_bytes(composed)
    except (InvalidArguments, OperationFailed) as exc:
        raise DraftUnsupported(f"its content cannot be rebuilt ({exc.message})") from None


def read_draft(raw: bytes) -> ParsedDraft:
    """Parse a saved draft and make sure it can be rebuilt; all or error."""
    draft = parse_draft(raw)
    check_rebuildable(draft)
    return draft


def check_body_edit(draft: ParsedDraft, changes: Message) -> None:
    """Refuse a body edit that would leave the other alternative stale."""
    has_text = changes.text is not UNSET
    has_html = changes.html is not UNSET
    if (has_text and not has_html and draft.html) or (
        has_html and not has_text and (draft.has_plain or draft.text)
    ):
        raise InvalidArguments(
            "this draft has both alternatives: supply both changes.text and changes.html, "
            "updating or clearing each"
        )


def revised_message(draft: ParsedDraft, changes: Message) -> tuple[Message, bool]:
    """Apply a patch to the draft's fields; return the message and whether empty text stays.

    Supplying `text` (even "") makes the plain part explicit, so it is not derived from HTML.
    """
    check_body_edit(draft, changes)
    updates = {name: getattr(changes, name) for name in changes.present()}
    revised = structs.replace(draft.message(), **updates)
    return revised, draft.has_plain or changes.text is not UNSET
