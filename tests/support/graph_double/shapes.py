"""The JSON bodies the double answers with, shaped after Graph's user, mailFolder and message."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import HeaderParser
from email.policy import default
from typing import Any

from support.graph_double.folders import Folder
from support.graph_double.ids import message_id
from support.graph_double.store import Detail

METADATA = "https://graph.microsoft.com/v1.0/$metadata"
USER_MEMBERS = ("id", "mail", "userPrincipalName", "displayName")
FOLDER_MEMBERS = (
    "id",
    "displayName",
    "parentFolderId",
    "childFolderCount",
    "unreadItemCount",
    "totalItemCount",
    "isHidden",
)
MESSAGE_MEMBERS = (
    "id",
    "parentFolderId",
    "internetMessageId",
    "subject",
    "from",
    "sender",
    "toRecipients",
    "ccRecipients",
    "bccRecipients",
    "replyTo",
    "receivedDateTime",
    "sentDateTime",
    "isRead",
    "isDraft",
    "flag",
    "hasAttachments",
    "bodyPreview",
    "importance",
    "changeKey",
    "createdDateTime",
    "lastModifiedDateTime",
    "conversationId",
)


def stamp(when: datetime) -> str:
    """A UTC time as Graph writes it: 2026-01-02T03:04:05Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def selected(members: dict[str, Any], select: Sequence[str] | None) -> dict[str, Any]:
    """Only the $select-ed members, `id` and OData annotations (all of them without $select)."""
    if select is None:
        return members
    keep = {*select, "id"}
    return {k: v for k, v in members.items() if k in keep or k.startswith("@odata.")}


def user(user_id: str, mail: str | None, upn: str, select: Sequence[str] | None) -> dict[str, Any]:
    """/me."""
    members = {
        "@odata.context": f"{METADATA}#users/$entity",
        "id": user_id,
        "mail": mail,
        "userPrincipalName": upn,
        "displayName": "Dana Example",
    }
    return selected(members, select)


def folder(f: Folder, select: Sequence[str] | None) -> dict[str, Any]:
    """One mailFolder (without @odata.context)."""
    members = {
        "id": f.id,
        "displayName": f.display_name,
        "parentFolderId": f.parent_id,
        "childFolderCount": f.children,
        "unreadItemCount": f.unread,
        "totalItemCount": f.total,
        "isHidden": False,
    }
    return selected(members, select)


def _addresses(header: EmailMessage, name: str) -> list[dict[str, Any]]:
    try:
        value = header[name]
        found: Sequence[Address] = value.addresses if value is not None else ()
        pairs = [(a.display_name, a.addr_spec) for a in found]
    except (AttributeError, ValueError, IndexError, TypeError):
        pairs = email.utils.getaddresses([str(v) for v in header.get_all(name, [])])
    return [{"emailAddress": {"name": n or a, "address": a}} for n, a in pairs if a]


def _first(recipients: list[dict[str, Any]]) -> dict[str, Any] | None:
    return recipients[0] if recipients else None


def _sent(header: EmailMessage) -> str | None:
    raw = header.get("Date")
    try:
        when = email.utils.parsedate_to_datetime(str(raw)) if raw else None
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return stamp(when if when.tzinfo else when.replace(tzinfo=UTC))


def _importance(header: EmailMessage) -> str:
    value = str(header.get("Importance", "")).strip().lower()
    if value in ("high", "low", "normal"):
        return value
    m = re.match(r"\s*(\d)", str(header.get("X-Priority", "")))
    if m:
        return "high" if m[1] in "12" else "low" if m[1] in "45" else "normal"
    return "normal"


def _opaque(prefix: str, *parts: str) -> str:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()[:21]
    return prefix + base64.urlsafe_b64encode(digest).decode()


def message(d: Detail, select: Sequence[str] | None) -> dict[str, Any]:
    """One message (without @odata.context): its flags, its headers decoded and its preview."""
    text = d.header.decode("utf-8", "replace")
    header = HeaderParser(policy=default).parsestr(text)
    assert isinstance(header, EmailMessage)
    internet_id = str(header.get("Message-ID", "")).strip() or None
    references = str(header.get("References", "")).split()
    thread_root = references[0] if references else internet_id or d.guid
    change_key = _opaque("CQAAAB", d.folder.guid, d.guid, str(d.modseq))
    sender = _addresses(header, "Sender") or _addresses(header, "From")
    received = stamp(d.received)
    members: dict[str, Any] = {
        "@odata.etag": f'W/"{change_key}"',
        "id": message_id(d.guid),
        "parentFolderId": d.folder.id,
        "internetMessageId": internet_id,
        "subject": str(header.get("Subject", "")),
        "from": _first(_addresses(header, "From")),
        "sender": _first(sender),
        "toRecipients": _addresses(header, "To"),
        "ccRecipients": _addresses(header, "Cc"),
        "bccRecipients": _addresses(header, "Bcc"),
        "replyTo": _addresses(header, "Reply-To"),
        "receivedDateTime": received,
        "sentDateTime": _sent(header),
        "isRead": "\\seen" in d.flags,
        "isDraft": "\\draft" in d.flags,
        "flag": {"flagStatus": "flagged" if "\\flagged" in d.flags else "notFlagged"},
        "hasAttachments": d.has_attachments,
        "bodyPreview": d.preview[:255],
        "importance": _importance(header),
        "changeKey": change_key,
        "createdDateTime": received,
        "lastModifiedDateTime": received,
        "conversationId": _opaque("AAQk", thread_root),
    }
    return selected(members, select)


def context(account_id: str, tail: str) -> str:
    """An @odata.context URL for this user's `tail` (e.g. "mailFolders", "messages/$entity")."""
    return f"{METADATA}#users('{account_id}')/{tail}"


def collection(
    context_url: str, items: list[dict[str, Any]], next_link: str | None
) -> dict[str, Any]:
    """A collection page: @odata.context, value, and @odata.nextLink when more remain."""
    body: dict[str, Any] = {"@odata.context": context_url, "value": items}
    if next_link is not None:
        body["@odata.nextLink"] = next_link
    return body
