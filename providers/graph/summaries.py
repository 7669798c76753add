"""Graph messages as angelos shows them: references, flags and summaries."""

from __future__ import annotations

from datetime import UTC, datetime

from providers.graph.account import PROVIDER
from providers.graph.folders import GRAPH_ID
from providers.graph.wire import Message, Recipient
from providers.mime.compose.preview import rfc3339
from schemas import errors
from schemas.mailbox import Reference
from schemas.messages import Address
from schemas.search import MessageSummary


def reference_of(message: Message, account: str) -> Reference:
    """The whole Graph reference of a message (folder = its parent folder's native ID)."""
    folder = message.parent_folder_id or ""
    if GRAPH_ID.fullmatch(message.id) is None or GRAPH_ID.fullmatch(folder) is None:
        raise errors.ServiceUnavailable("Microsoft Graph sent a malformed message or folder ID")
    return Reference(folder=folder, provider=PROVIDER, account=account, id=message.id)


def flags_of(message: Message) -> list[str]:
    """The IMAP-style flags Graph's members stand for."""
    flags = []
    if message.is_read:
        flags.append("\\Seen")
    if message.flag.flag_status == "flagged":
        flags.append("\\Flagged")
    if message.is_draft:
        flags.append("\\Draft")
    return flags


def moment(value: str | None) -> datetime | None:
    """A Graph timestamp (ISO 8601, UTC) as an aware datetime, or None."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def addresses(recipients: list[Recipient]) -> list[Address]:
    """Graph recipients as summary addresses (those without an address are left out)."""
    found = []
    for recipient in recipients:
        mailbox = recipient.email_address
        if mailbox.address:
            found.append(Address(name=mailbox.name or "", address=mailbox.address))
    return found


def summary_of(message: Message, account: str) -> MessageSummary:
    """The summary row of one Graph message; Graph gives no size, so size_bytes is 0."""
    when = moment(message.sent_date_time) or moment(message.received_date_time)
    if when is None:
        raise errors.ServiceUnavailable("Microsoft Graph sent a message without any date")
    return MessageSummary(
        reference=reference_of(message, account),
        subject=message.subject or "",
        from_=addresses([message.from_] if message.from_ is not None else []),
        to=addresses(message.to_recipients),
        date=rfc3339(when),
        flags=flags_of(message),
        size_bytes=0,
    )
