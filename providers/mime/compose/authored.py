"""The caller's composition object, validated field by field.

Run before any mailbox access; every refusal is InvalidArguments naming the field only.
"""

from __future__ import annotations

from msgspec import UNSET, Struct, field

from providers.mime.compose import limits
from providers.mime.compose.addresses import Mailbox, parse_entries
from providers.mime.compose.attachments import Outgoing, caller_attachments
from providers.mime.compose.html_plain import derive_plain_text
from providers.mime.compose.text_rules import (
    check_body,
    check_subject,
    normalize_message_id,
    normalize_newlines,
)
from providers.mime.compose.thread_ids import references_fit
from schemas.args.common import Message
from schemas.errors import InvalidArguments


class Authored(Struct, frozen=True, kw_only=True):
    """A validated composition; a recipient list is None when the caller omitted it."""

    to: list[Mailbox] | None
    cc: list[Mailbox] | None
    bcc: list[Mailbox] | None
    subject: str
    text: str
    html: str
    attachments: list[Outgoing] = field(default_factory=list)
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)


def read_message(message: Message, *, keep_empty_text: bool = False) -> Authored:
    """Validate every supplied member; derive the plain text from HTML when text is empty.

    `keep_empty_text` keeps an explicitly empty plain alternative (saved drafts only).
    """
    lists = {name: getattr(message, name) for name in ("to", "cc", "bcc")}
    count = sum(len(value) for value in lists.values() if value is not UNSET)
    if count > limits.MAX_RECIPIENTS:
        raise InvalidArguments("message.to, cc and bcc may hold at most 50 recipients in total")
    parsed = {
        name: None if value is UNSET else parse_entries(value, f"message.{name}")
        for name, value in lists.items()
    }
    subject = "" if message.subject is UNSET else message.subject
    check_subject(subject)
    text = "" if message.text is UNSET else message.text
    html = "" if message.html is UNSET else message.html
    check_body(text, "message.text")
    check_body(html, "message.html")
    if not text and html and not keep_empty_text:
        text = derive_plain_text(html)
    attachments = [] if message.attachments is UNSET else caller_attachments(message.attachments)
    return Authored(
        to=parsed["to"],
        cc=parsed["cc"],
        bcc=parsed["bcc"],
        subject=subject,
        text=normalize_newlines(text),
        html=normalize_newlines(html),
        attachments=attachments,
        in_reply_to=_in_reply_to(message),
        references=_references(message),
    )


def _in_reply_to(message: Message) -> str:
    if message.in_reply_to is UNSET or message.in_reply_to == "":
        return ""
    normalized = normalize_message_id(message.in_reply_to)
    if normalized is None:
        raise InvalidArguments("message.in_reply_to must be one valid Message-ID like <id@host>")
    return normalized


def _references(message: Message) -> list[str]:
    if message.references is UNSET:
        return []
    if len(message.references) > limits.MAX_REFERENCES:
        raise InvalidArguments("message.references may hold at most 100 Message-IDs")
    chain: list[str] = []
    for index, value in enumerate(message.references):
        normalized = normalize_message_id(value)
        if normalized is None:
            raise InvalidArguments(f"message.references[{index}] must be a valid Message-ID")
        chain.append(normalized)
    if not references_fit(chain):
        raise InvalidArguments("message.references must be at most 8 KiB joined by spaces")
    return chain
