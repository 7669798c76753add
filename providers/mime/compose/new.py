"""new messages and saved drafts, plus the Bcc-bearing variants."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from msgspec import structs

from providers.mime.compose import limits
from providers.mime.compose.addresses import Mailbox, mailbox_problem
from providers.mime.compose.authored import Authored, read_message
from providers.mime.compose.build import Plan, build
from providers.mime.compose.encoding import fold_header
from providers.mime.compose.text_rules import longest_line
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity
from schemas.digest import GRAPH_TRANSPORT, approval_digest
from schemas.errors import InvalidArguments

GRAPH_WARNING = (
    "Microsoft Graph files the Sent copy itself; its acceptance only means queued, not "
    "delivered; never retry a submission whose outcome is unknown"
)


def identity_from_config(sender: str, username: str, aliases: Sequence[str]) -> Identity:
    """The Identity for MAIL_FROM, MAIL_USERNAME (only when a bare address) and MAIL_ALIASES."""
    own = [sender]
    if mailbox_problem(Mailbox("", username)) is None:
        own.append(username)
    own.extend(aliases)
    return Identity(sender=sender, self_addresses=tuple(own))


def _plan(authored: Authored, warnings: Sequence[str]) -> Plan:
    return Plan(
        to=authored.to or [],
        cc=authored.cc or [],
        bcc=authored.bcc or [],
        subject=authored.subject,
        text=authored.text,
        html=authored.html,
        attachments=authored.attachments,
        in_reply_to=authored.in_reply_to,
        references=authored.references,
        warnings=list(warnings),
    )


def compose_new(
    message: Message,
    *,
    identity: Identity,
    prepared_id: str,
    created_at: datetime,
    keep_empty_text: bool = False,
    warnings: Sequence[str] = (),
) -> ComposedMessage:
    """Compose a new outbound message exactly as given (at least one recipient)."""
    authored = read_message(message, keep_empty_text=keep_empty_text)
    return build(_plan(authored, warnings), identity, prepared_id, created_at)


def compose_draft(
    message: Message,
    *,
    identity: Identity,
    draft_id: str,
    created_at: datetime,
    keep_empty_text: bool = False,
) -> ComposedMessage:
    """Compose a saved draft: the outbound rules, except that no recipient is needed."""
    authored = read_message(message, keep_empty_text=keep_empty_text)
    return build(_plan(authored, ()), identity, draft_id, created_at, allow_no_recipients=True)


def with_bcc_header(composed: ComposedMessage, limit: int = limits.MAX_MESSAGE_BYTES) -> bytes:
    """The wire bytes with a `Bcc:` line prepended when there are Bcc recipients."""
    if not composed.bcc:
        return composed.raw
    raw = fold_header("Bcc", ", ".join(composed.bcc)) + composed.raw
    if len(raw) > limit:
        raise InvalidArguments(f"the message with its Bcc header exceeds {limit} bytes")
    if longest_line(raw) > limits.MAX_LINE_BYTES:
        raise InvalidArguments("the Bcc header line would exceed 998 bytes")
    return raw


def build_draft_bytes(composed: ComposedMessage) -> bytes:
    """The bytes to APPEND as a draft: outbound bytes plus a Bcc line (private to the owner)."""
    return with_bcc_header(composed)


def for_microsoft_graph(composed: ComposedMessage) -> ComposedMessage:
    """The Graph form: Bcc-bearing MIME within 3 MiB - 1024 and the Graph-tagged digest."""
    raw = with_bcc_header(composed, limits.MAX_GRAPH_MESSAGE_BYTES)
    if len(raw) > limits.MAX_GRAPH_MESSAGE_BYTES:
        raise InvalidArguments("the message exceeds the Microsoft Graph limit of 3 MiB - 1024")
    digest = approval_digest(
        composed.envelope_from, composed.recipients, raw, transport=GRAPH_TRANSPORT
    )
    return structs.replace(
        composed,
        raw=raw,
        digest=digest,
        transport=GRAPH_TRANSPORT,
        warnings=[*composed.warnings, GRAPH_WARNING],
    )
