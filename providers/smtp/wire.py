"""Pure SMTP wire helpers: DATA transparency, enhanced status codes, bare mailboxes."""

from __future__ import annotations

import re

MAX_MAILBOX_BYTES = 254

# RFC 3463: class.subject.detail, the class matching the reply's first digit.
_ENHANCED = re.compile(r"([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])")


def normalize_line_endings(raw: bytes) -> bytes:
    """Turn every CRLF, bare CR and bare LF into CRLF and end a non-empty message with CRLF."""
    # Plain replaces (one C pass each) rather than a regex substitution per line break:
    # 99 ms -> a few ms for 5 MiB, on the event loop.
    text = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").replace(b"\n", b"\r\n")
    if text and not text.endswith(b"\r\n"):
        text += b"\r\n"
    return text


def stuff_dots(text: bytes) -> bytes:
    """Double the dot that starts any line of CRLF-normalized text (RFC 5321 §4.5.2)."""
    stuffed = text.replace(b"\n.", b"\n..")
    return b"." + stuffed if stuffed.startswith(b".") else stuffed


def dot_stuff(raw: bytes) -> bytes:
    """Encode a message for DATA: CRLF line endings, dots doubled, no end-of-data marker."""
    return stuff_dots(normalize_line_endings(raw))


def enhanced_status(code: int, text: str) -> str:
    """The RFC 3463 status at the start of a reply's first line, or "" when there is none."""
    first_line = text.split("\n", 1)[0].strip()
    match = _ENHANCED.match(first_line)
    if match is None or str(code)[:1] != match[1]:
        return ""
    return match[0]


def is_bare_mailbox(address: str) -> bool:
    """Tell whether `address` is a bare ASCII `local@domain` safe inside `<...>` on the wire."""
    if not address.isascii() or len(address) > MAX_MAILBOX_BYTES:
        return False
    if any(not 0x21 <= ord(ch) <= 0x7E or ch in "<>" for ch in address):
        return False
    local, at, domain = address.rpartition("@")
    return bool(at and local and domain)
