"""Pure helpers over raw header values: display cleaning, addresses, dates and message IDs.

Nothing here raises on malformed input except the classified limits (SafetyLimit) that the
spec turns into errors: too many or too long message IDs.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from providers.mime.charsets import loose_text
from providers.mime.cleaning import clean_line
from providers.mime.encoded_words import decode_words
from schemas.errors import SafetyLimit
from schemas.messages import Address

MAX_ADDRESSES = 100
MAX_ADDRESS_PART_BYTES = 1024
MAX_MESSAGE_IDS = 100
MAX_MESSAGE_ID_BYTES = 1024
_MAX_DATE_CHARS = 256

_ADDRESS_SPECIAL = re.compile(r'["(<:,;]')
_WHITESPACE = re.compile(r"\s+")
_MESSAGE_ID = re.compile(r"<([^<>\s\x00-\x1f\x7f]*)>")


# --- cleaning ---------------------------------------------------------------------------------


def clean(value: bytes | str, limit_bytes: int) -> str:
    """Remove control characters, collapse whitespace and cut at a UTF-8 boundary."""
    return clean_line(loose_text(value), limit_bytes)


def display_value(value: bytes | str, limit_bytes: int = 4096) -> str:
    """Decode RFC 2047 words in a raw header value and clean it for display."""
    return clean(decode_words(value), limit_bytes)


# --- addresses --------------------------------------------------------------------------------


def parse_addresses(value: bytes | str) -> list[Address]:
    """Parse an address list (groups, quoted names with commas, comments); never raises.

    At most 100 entries are kept; entries without an address are dropped; names are RFC 2047
    decoded; name and address are cleaned and cut to 1024 bytes each.
    """
    text = loose_text(value)
    found: list[Address] = []
    pieces: list[tuple[str, bool]] = []  # phrase text, quoted?
    comment = ""
    angle: str | None = None
    i, n = 0, len(text)

    def finish() -> None:
        nonlocal comment, angle
        entry = _entry(pieces, comment, angle)
        if entry is not None:
            found.append(entry)
        pieces.clear()
        comment, angle = "", None

    while i < n and len(found) < MAX_ADDRESSES:
        special = _ADDRESS_SPECIAL.search(text, i)
        stop = special.start() if special else n
        if stop > i:
            pieces.append((text[i:stop], False))
        if special is None:
            break
        ch = text[stop]
        if ch == '"':
            quoted, i = _quoted(text, stop + 1)
            pieces.append((quoted, True))
        elif ch == "(":
            comment, i = _comment(text, stop + 1)
        elif ch == "<":
            close = text.find(">", stop + 1)
            close = n if close < 0 else close
            angle, i = text[stop + 1 : close], close + 1
        elif ch == ":":  # group display name: not an address of its own
            pieces.clear()
            comment, angle, i = "", None, stop + 1
        else:  # "," or ";"
            finish()
            i = stop + 1
    if len(found) < MAX_ADDRESSES:
        finish()
    return found[:MAX_ADDRESSES]


def _quoted(text: str, i: int) -> tuple[str, int]:
    """Read a quoted string body starting after its opening quote; return it and the next index."""
    chars: list[str] = []
    n = len(text)
    while i < n and text[i] != '"':
        if text[i] == "\\" and i + 1 < n:
            i += 1
        chars.append(text[i])
        i += 1
    return "".join(chars), i + 1


def _comment(text: str, i: int) -> tuple[str, int]:
    """Read a (possibly nested) comment starting after its "("; return it and the next index."""
    chars: list[str] = []
    depth, n = 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            i += 1
            ch = text[i]
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return "".join(chars), i + 1
        chars.append(ch)
        i += 1
    return "".join(chars), n


def _entry(pieces: list[tuple[str, bool]], comment: str, angle: str | None) -> Address | None:
    """Build one Address from a parsed entry, or None when it carries no address."""
    if angle is not None:
        address = angle.strip()
        if address.startswith("@") and ":" in address:  # obsolete source route
            address = address.split(":", 1)[1]
        name = "".join(piece for piece, _ in pieces) or comment
    else:
        address = "".join(
            f'"{piece}"' if quoted else _WHITESPACE.sub("", piece) for piece, quoted in pieces
        )
        if "@" not in address:
            return None
        name = comment
    if '"' not in address:
        address = _WHITESPACE.sub("", address)
    address = clean(address, MAX_ADDRESS_PART_BYTES)
    if not address:
        return None
    return Address(name=clean(decode_words(name), MAX_ADDRESS_PART_BYTES), address=address)


# --- dates and message IDs --------------------------------------------------------------------


def parse_date(value: bytes | str) -> datetime | None:
    """Parse an RFC 5322 date (obsolete forms tolerated) to an aware datetime, or None."""
    text = clean(value, _MAX_DATE_CHARS)
    if not text:
        return None
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:  # "-0000": the offset is unknown, the time is UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def message_ids(value: bytes | str) -> list[str]:
    """Return the "<...>" IDs of a Message-ID, References or In-Reply-To value, in order.

    Raises SafetyLimit for more than 100 IDs or an ID over 1024 bytes.
    """
    ids: list[str] = []
    for match in _MESSAGE_ID.finditer(loose_text(value)):
        inner = match.group(1)
        if not inner:
            continue
        if len(inner.encode("utf-8", "replace")) > MAX_MESSAGE_ID_BYTES:
            raise SafetyLimit("a message ID exceeds 1024 bytes")
        if len(ids) == MAX_MESSAGE_IDS:
            raise SafetyLimit("more than 100 message IDs in one header field")
        ids.append(match.group(0))
    return ids
