"""Graph-like ids for Dovecot's own stable ids, well-known folder names and mailbox-name decoding.

Dovecot 2.3.19 has no OBJECTID (RFC 8474: STATUS MAILBOXID and FETCH EMAILID are refused), so
the ids wrap its older equivalents, checked by experiment on the rig's maildir Dovecot:
a mailbox's `STATUS X-GUID` (kept across RENAME) and a message's `FETCH X-GUID` (the maildir
file's base name: kept across MOVE and flag changes, searchable with `SEARCH X-GUID`). An IMAP
COPY keeps the X-GUID too, so the double copies by FETCH and APPEND, which makes a new file and
so a new id, as Graph's copy makes a new item. Ids are "AAMk" and the URL-safe base64 (padded)
of a kind byte and the Dovecot id, so they match [A-Za-z0-9_=-] like Graph's.
"""

from __future__ import annotations

import base64
import binascii
import re

PREFIX = "AAMk"
FOLDER_KIND = b"F"
MESSAGE_KIND = b"M"
ROOT_KIND = b"R"
ID_PATTERN = re.compile(r"[A-Za-z0-9_=-]{1,1024}")

# Graph's well-known folder names and the special-use attribute (or INBOX) each one stands for.
WELL_KNOWN: dict[str, str] = {
    "inbox": "INBOX",
    "drafts": "\\Drafts",
    "sentitems": "\\Sent",
    "deleteditems": "\\Trash",
    "archive": "\\Archive",
    "junkemail": "\\Junk",
}
ROOT_NAME = "msgfolderroot"
# Display names Graph gives the special folders, by special use (or INBOX).
SPECIAL_DISPLAY_NAMES: dict[str, str] = {
    "INBOX": "Inbox",
    "\\Drafts": "Drafts",
    "\\Sent": "Sent Items",
    "\\Trash": "Deleted Items",
    "\\Archive": "Archive",
    "\\Junk": "Junk Email",
}


class MalformedId(ValueError):
    """A path or body named an id that no id of this double can be."""


def _wrap(kind: bytes, payload: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(kind + payload).decode("ascii")


def _unwrap(value: str, kind: bytes) -> bytes:
    if not ID_PATTERN.fullmatch(value) or not value.startswith(PREFIX):
        raise MalformedId(value)
    try:
        raw = base64.urlsafe_b64decode(value[len(PREFIX) :].encode("ascii"))
    except (binascii.Error, ValueError):
        raise MalformedId(value) from None
    if raw[:1] != kind or len(raw) < 2:
        raise MalformedId(value)
    return raw[1:]


def folder_id(mailbox_guid: str) -> str:
    """The Graph id of the mailbox whose STATUS X-GUID is `mailbox_guid` (32 hex digits)."""
    return _wrap(FOLDER_KIND, bytes.fromhex(mailbox_guid))


def root_id() -> str:
    """The Graph id of the root folder (msgfolderroot), which no IMAP mailbox is."""
    return _wrap(ROOT_KIND, ROOT_NAME.encode("ascii"))


def mailbox_guid(graph_id: str) -> str:
    """The mailbox X-GUID a folder id wraps (MalformedId when it is no folder id)."""
    raw = _unwrap(graph_id, FOLDER_KIND)
    if len(raw) != 16:
        raise MalformedId(graph_id)
    return raw.hex()


def message_id(message_guid: str) -> str:
    """The Graph id of the message whose FETCH X-GUID is `message_guid`."""
    return _wrap(MESSAGE_KIND, message_guid.encode("ascii"))


def message_guid(graph_id: str) -> str:
    """The message X-GUID a message id wraps (MalformedId when it is no message id)."""
    raw = _unwrap(graph_id, MESSAGE_KIND)
    try:
        guid = raw.decode("ascii")
    except UnicodeDecodeError:
        raise MalformedId(graph_id) from None
    # An X-GUID is one IMAP atom: it goes on the wire unquoted.
    if not re.fullmatch(r"[A-Za-z0-9.,=_:+-]+", guid):
        raise MalformedId(graph_id)
    return guid


def decode_mailbox(name: str) -> str:
    """Decode IMAP modified UTF-7 (RFC 3501 §5.1.3) into the mailbox's real name."""
    out: list[str] = []
    i = 0
    while i < len(name):
        if name[i] != "&":
            out.append(name[i])
            i += 1
            continue
        end = name.index("-", i)
        chunk = name[i + 1 : end]
        if chunk:
            raw = chunk.replace(",", "/")
            raw += "=" * (-len(raw) % 4)
            out.append(base64.b64decode(raw).decode("utf-16-be"))
        else:
            out.append("&")
        i = end + 1
    return "".join(out)
