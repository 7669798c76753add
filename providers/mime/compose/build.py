"""Turn a composition plan into the exact wire bytes, envelope, digest and review fields."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from msgspec import Struct, field

from providers.mime.compose import limits
from providers.mime.compose.addresses import Mailbox, header_form, mailbox_problem, normalize
from providers.mime.compose.attachments import Outgoing
from providers.mime.compose.dates import rfc1123z
from providers.mime.compose.encoding import subject_field
from providers.mime.compose.text_rules import (
    check_body,
    check_subject,
    longest_line,
    normalize_message_id,
)
from providers.mime.compose.thread_ids import references_fit
from providers.mime.compose.wire import (
    attachment_part,
    body_part,
    multipart,
    render_message,
)
from schemas.compose import AttachmentSummary, ComposedMessage, Identity, SourceExtras
from schemas.digest import approval_digest
from schemas.errors import InvalidArguments, OperationFailed

_PREPARED_ID = re.compile(r"[0-9a-f]{32}")


class Plan(Struct, frozen=True, kw_only=True):
    """Everything a message is built from, after action-specific planning."""

    to: list[Mailbox]
    cc: list[Mailbox]
    bcc: list[Mailbox]
    subject: str
    text: str
    html: str
    attachments: list[Outgoing] = field(default_factory=list)
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extras: SourceExtras | None = None


def sender_mailbox(identity: Identity) -> Mailbox:
    """The configured sender as a mailbox; a sender that cannot be used fails the call."""
    mailbox = Mailbox("", identity.sender)
    if mailbox_problem(mailbox) is not None:
        raise OperationFailed("the configured sender address cannot be used to compose mail")
    return mailbox


def build(
    plan: Plan,
    identity: Identity,
    prepared_id: str,
    created_at: datetime,
    *,
    allow_no_recipients: bool = False,
) -> ComposedMessage:
    """Validate a plan and build its wire bytes; Date and IDs derive from the inputs only."""
    if _PREPARED_ID.fullmatch(prepared_id) is None:
        raise ValueError("prepared_id must be 32 lowercase hex characters")
    if created_at.utcoffset() is None:
        raise ValueError("created_at must be timezone-aware")
    sender = sender_mailbox(identity)
    if len(plan.to) + len(plan.cc) + len(plan.bcc) > limits.MAX_RECIPIENTS:
        raise InvalidArguments("a message may have at most 50 recipients (To + Cc + Bcc)")
    recipients = normalize(plan.to, plan.cc, plan.bcc)
    if not recipients.envelope and not allow_no_recipients:
        raise InvalidArguments("a message needs at least one recipient in to, cc or bcc")
    check_subject(plan.subject, "subject")
    check_body(plan.text, "text")
    check_body(plan.html, "html")
    _check_attachments(plan.attachments)
    _check_threading(plan.in_reply_to, plan.references)
    domain = sender.address.rpartition("@")[2]
    message_id = normalize_message_id(f"<{prepared_id}@{domain}>")
    if message_id is None:
        raise OperationFailed("the configured sender's domain cannot form a safe Message-ID")

    headers: list[tuple[str, str]] = [("From", header_form(sender))]
    if recipients.to:
        headers.append(("To", ", ".join(header_form(m) for m in recipients.to)))
    if recipients.cc:
        headers.append(("Cc", ", ".join(header_form(m) for m in recipients.cc)))
    headers += [
        ("Subject", subject_field(plan.subject)),
        ("Date", rfc1123z(created_at.astimezone(UTC))),
        ("Message-ID", message_id),
        ("MIME-Version", "1.0"),
    ]
    if plan.in_reply_to:
        headers.append(("In-Reply-To", plan.in_reply_to))
    if plan.references:
        headers.append(("References", " ".join(plan.references)))
    content = body_part(plan.text, plan.html, f"=_alternative_{prepared_id}")
    if plan.attachments:
        mixed = f"=_mixed_{prepared_id}"
        files = [attachment_part(outgoing, mixed) for outgoing in plan.attachments]
        content = multipart("mixed", mixed, [content, *files])
    raw = render_message(headers, content)
    if len(raw) > limits.MAX_MESSAGE_BYTES:
        raise InvalidArguments("the encoded message exceeds 5 MiB; send smaller attachments")
    if longest_line(raw) > limits.MAX_LINE_BYTES:
        raise InvalidArguments("a header line would exceed 998 bytes; shorten names or IDs")

    envelope = recipients.envelope
    return ComposedMessage(
        prepared_id=prepared_id,
        raw=raw,
        envelope_from=sender.address,
        recipients=envelope,
        to=[header_form(m) for m in recipients.to],
        cc=[header_form(m) for m in recipients.cc],
        bcc=[header_form(m) for m in recipients.bcc],
        subject=plan.subject,
        text=plan.text,
        html=plan.html,
        attachments=[_summary(outgoing) for outgoing in plan.attachments],
        message_id=message_id,
        in_reply_to=plan.in_reply_to,
        references=list(plan.references),
        warnings=list(plan.warnings),
        digest=approval_digest(sender.address, envelope, raw),
        extras=plan.extras,
    )


def _check_attachments(attachments: list[Outgoing]) -> None:
    if len(attachments) > limits.MAX_ATTACHMENTS:
        raise InvalidArguments("a message may carry at most 20 attachments")
    if sum(len(a.data) for a in attachments) > limits.MAX_ATTACHMENT_TOTAL_BYTES:
        raise InvalidArguments("attachments exceed 3 MiB decoded in total")


def _check_threading(in_reply_to: str, references: list[str]) -> None:
    if in_reply_to and normalize_message_id(in_reply_to) != in_reply_to:
        raise InvalidArguments("in_reply_to must be one valid Message-ID")
    if any(normalize_message_id(ref) != ref for ref in references):
        raise InvalidArguments("references must be valid Message-IDs")
    if not references_fit(references):
        raise InvalidArguments("references may hold at most 100 IDs and 8 KiB")


def _summary(outgoing: Outgoing) -> AttachmentSummary:
    return AttachmentSummary(
        filename=outgoing.filename,
        content_type=outgoing.content_type,
        bytes=len(outgoing.data),
        sha256=hashlib.sha256(outgoing.data).hexdigest(),
    )
