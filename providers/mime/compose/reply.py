"""reply and reply_all: recipients derived from the source, threading, subject, quotation."""

from __future__ import annotations

from datetime import datetime

from providers.mime.compose.addresses import Mailbox, ascii_lower, dedupe
from providers.mime.compose.authored import read_message
from providers.mime.compose.build import Plan, build
from providers.mime.compose.quoting import reply_html, reply_text, source_body
from providers.mime.compose.source import AddressField, SourceHeaders, read_source_headers
from providers.mime.compose.text_rules import is_valid_body, reply_subject
from providers.mime.compose.thread_ids import (
    bound_references,
    parse_id_list,
    parse_single_id,
    reply_chain,
)
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity, SourceExtras, SourceMessage
from schemas.errors import InvalidArguments, OperationFailed

DATE_WARNING = "the source Date is missing or invalid, so the quotation carries no date"
TRIMMED_WARNING = (
    "the References chain was shortened to 100 IDs and 8 KiB, keeping the first (root) and "
    "the most recent IDs"
)
IN_REPLY_TO_WARNING = (
    "the source In-Reply-To is ambiguous or invalid and was ignored; References holds only "
    "the parent"
)


def self_keys(identity: Identity) -> set[str]:
    """The owner's addresses, lower-cased for ASCII case-insensitive comparison."""
    return {ascii_lower(a) for a in (identity.sender, *identity.self_addresses)}


def check_source(source: SourceMessage) -> None:
    """Refuse a source that was only partly read."""
    if source.truncated:
        raise OperationFailed(
            "the source message exceeds the read limits and was truncated; prepare this "
            "message manually with action new"
        )


def quotable_text(source: SourceMessage) -> str:
    """The source text ready for quoting; a text the body validator refuses fails the call."""
    if not is_valid_body(source.text):
        raise OperationFailed(
            "the source text cannot be quoted; set quote_original false or prepare manually"
        )
    return source_body(source.text)


def compose_reply(
    message: Message,
    source: SourceMessage,
    *,
    identity: Identity,
    prepared_id: str,
    created_at: datetime,
    reply_all: bool = False,
    quote_original: bool = True,
) -> ComposedMessage:
    """Compose a reply (or reply_all) to `source`; omitted To/Cc are derived from it."""
    authored = read_message(message)
    check_source(source)
    headers = read_source_headers(source)
    parent = parse_single_id(headers.message_id) if headers.message_id is not None else None
    if parent is None:
        raise OperationFailed(
            "the source does not have exactly one valid Message-ID; prepare a standalone "
            "message with action new instead"
        )
    warnings = [*source.warnings, *headers.warnings]
    chain, trimmed = bound_references(reply_chain(parent, _prior_chain(headers, warnings)))
    if trimmed:
        warnings.append(TRIMMED_WARNING)
    owner = self_keys(identity)
    to = authored.to if authored.to is not None else derive_to(headers, owner)
    cc = authored.cc
    if cc is None:
        cc = derive_cc(headers, owner) if reply_all else []
    text, html = authored.text, authored.html
    if quote_original:
        body = quotable_text(source)
        if headers.date is None:
            warnings.append(DATE_WARNING)
        text = reply_text(text, headers, body)
        html = reply_html(html, headers, body) if html else ""
    plan = Plan(
        to=to,
        cc=cc,
        bcc=authored.bcc or [],
        subject=authored.subject or reply_subject(headers.subject),
        text=text,
        html=html,
        attachments=authored.attachments,
        in_reply_to=parent,
        references=chain,
        warnings=warnings,
        extras=SourceExtras(
            source=source.reference,
            source_message_id=parent,
            quote_original=quote_original,
            original_mode="quoted" if quote_original else "none",
            omitted_source_attachments=list(source.attachments),
        ),
    )
    return build(plan, identity, prepared_id, created_at)


def _prior_chain(headers: SourceHeaders, warnings: list[str]) -> list[str]:
    """The thread before the parent: References, else a single In-Reply-To, else nothing."""
    if headers.references is not None:
        ids = parse_id_list(headers.references)
        if not ids:
            raise OperationFailed(
                "the source References header is malformed; prepare a standalone message "
                "with action new instead"
            )
        return ids
    if headers.in_reply_to is not None:
        ids = parse_id_list(headers.in_reply_to)
        if ids is not None and len(ids) == 1:
            return ids
        warnings.append(IN_REPLY_TO_WARNING)
    return []


def _usable(field: AddressField, name: str, remedy: str) -> list[Mailbox]:
    if field.invalid:
        raise InvalidArguments(f"the source {name} header is malformed; {remedy}")
    return field.mailboxes


def _others(mailboxes: list[Mailbox], excluded: set[str]) -> list[Mailbox]:
    return dedupe(m for m in mailboxes if ascii_lower(m.address) not in excluded)


def derive_to(headers: SourceHeaders, owner: set[str]) -> list[Mailbox]:
    """Reply-To (else From) minus the owner; for the owner's own mail, To then Cc minus owner."""
    remedy = "supply message.to explicitly"
    has_reply_to = headers.reply_to.invalid or bool(headers.reply_to.mailboxes)
    name, primary = ("Reply-To", headers.reply_to) if has_reply_to else ("From", headers.from_)
    if not primary.invalid and not primary.mailboxes:
        raise InvalidArguments(f"the source has no From or Reply-To address; {remedy}")
    derived = _others(_usable(primary, name, remedy), owner)
    if not derived:
        derived = _others(_usable(headers.to, "To", remedy), owner)
    if not derived:
        derived = _others(_usable(headers.cc, "Cc", remedy), owner)
    return derived


def derive_cc(headers: SourceHeaders, owner: set[str]) -> list[Mailbox]:
    """Source To + Cc minus every source From author and the owner, de-duplicated."""
    remedy = "supply message.cc explicitly"
    authors = {ascii_lower(m.address) for m in _usable(headers.from_, "From", remedy)}
    candidates = [*_usable(headers.to, "To", remedy), *_usable(headers.cc, "Cc", remedy)]
    return _others(candidates, authors | owner)
