"""Pure helpers over raw header bytes: header blocks, RFC 2047 words, addresses, dates, IDs.

Nothing here raises on malformed input except the classified limits (SafetyLimit) that the
spec turns into errors: an oversized header block and too many or too long message IDs.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from msgspec import Struct

from providers.mime.charsets import loose_text
from providers.mime.cleaning import clean_line
from providers.mime.encoded_words import decode_words
from schemas.errors import SafetyLimit
from schemas.messages import Address

HEADER_BLOCK_LIMIT = 64 * 1024
MAX_ADDRESSES = 100
MAX_ADDRESS_PART_BYTES = 1024
MAX_MESSAGE_IDS = 100
MAX_MESSAGE_ID_BYTES = 1024
_MAX_DATE_CHARS = 256

_ADDRESS_SPECIAL = re.compile(r'["(<:,;]')
_WHITESPACE = re.compile(r"\s+")
_MESSAGE_ID = re.compile(r"<([^<>\s\x00-\x1f\x7f]*)>")
_FIELD_NAME = re.compile(rb"[\x21-\x39\x3b-\x7e]+")
# A line break not followed by a continuation: the end of a field's value.
_NEXT_FIELD = re.compile(rb"\n(?![ \t])")
_LINE_BREAKS = re.compile(rb"\r?\n|\r\Z")
# Field lines and their continuations; the first char tells the kinds apart, so no backtracking.
_HEADER_LINES = re.compile(
    rb"(?:[\x21-\x39\x3b-\x7e]+[ \t]*:[^\n]*(?:\n|\Z)(?:[ \t][^\n]*(?:\n|\Z))*)*"
)


class HeaderFields(Struct, frozen=True):
    """The fields of one header block in order: (name, unfolded raw value); names match any case.

    `malformed` counts lines that were neither a field nor a continuation and were skipped.
    """

    fields: tuple[tuple[str, bytes], ...] = ()
    malformed: int = 0

    def get(self, name: str) -> bytes | None:
        """Return the first value of field `name` (any case), or None."""
        wanted = name.lower()
        for key, value in self.fields:
            if key.lower() == wanted:
                return value
        return None

    def get_all(self, name: str) -> list[bytes]:
        """Return every value of field `name` (any case) in order."""
        wanted = name.lower()
        return [value for key, value in self.fields if key.lower() == wanted]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None


# --- header blocks ----------------------------------------------------------------------------


class HeaderBounds(Struct, frozen=True):
    """Where a header block's fields start and end and its body begins, as raw offsets.

    `separator_missing` tells that a line that is neither a field nor a continuation ended
    the block (no empty line): that line is the first line of the body.
    """

    header_start: int
    header_end: int
    body_start: int
    separator_missing: bool = False


def header_bounds(
    raw: bytes, start: int = 0, end: int | None = None, limit: int = HEADER_BLOCK_LIMIT
) -> HeaderBounds:
    """Delimit the header block of the entity at raw[start:end] (CRLF or bare LF framing).

    The block is the longest run of field and continuation lines; it is followed by an empty
    line, the end of the entity or (malformed) the first line of the body. A block longer
    than `limit` bytes raises SafetyLimit without scanning further.
    """
    stop = len(raw) if end is None else min(end, len(raw))
    position = start
    if raw.startswith(b"From ", start, stop):  # an mbox separator line is not a header
        newline = raw.find(b"\n", start, min(stop, start + limit + 1))
        position = stop if newline < 0 else newline + 1
    matched = _HEADER_LINES.match(raw, position, min(stop, start + limit + 1))
    header_end = matched.end() if matched else position
    if header_end - start > limit:
        raise SafetyLimit("a header block exceeds 64 KiB")
    if raw.startswith(b"\r\n", header_end, stop):
        return HeaderBounds(position, header_end, header_end + 2)
    if raw.startswith(b"\n", header_end, stop):
        return HeaderBounds(position, header_end, header_end + 1)
    return HeaderBounds(position, header_end, header_end, header_end < stop)


def parse_fields(block: bytes) -> HeaderFields:
    """Split an already delimited header block into unfolded fields (never raises)."""
    fields: list[tuple[str, list[bytes]]] = []
    malformed = 0
    for line in block.split(b"\n"):
        line = line.removesuffix(b"\r")
        if not line:
            continue
        if line[:1] in (b" ", b"\t"):
            if fields:
                fields[-1][1].append(line)
            else:
                malformed += 1
            continue
        raw_name, colon, value = line.partition(b":")
        raw_name = raw_name.rstrip(b" \t")
        if not colon or _FIELD_NAME.fullmatch(raw_name) is None:
            malformed += 1
            continue
        fields.append((raw_name.decode("ascii"), [value]))
    unfolded = tuple((name, b"".join(parts).strip(b" \t")) for name, parts in fields)
    return HeaderFields(unfolded, malformed)


class FieldFinder:
    """Finds the first field of each of a few names in a delimited header block.

    Each name costs one literal search of the block however many fields it holds, so a part
    header of 8,000 one-letter fields is not split into 8,000 Python tuples to read three.
    The value is unfolded exactly as parse_fields unfolds it.
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        # Searched in "\n" + the lower-cased block: a field starts the block or follows a LF.
        self.patterns = [
            (name, re.compile(b"\n" + re.escape(name.lower().encode("ascii")) + rb"[ \t]*:"))
            for name in names
        ]

    def first_fields(self, block: bytes) -> HeaderFields:
        """Return the first field of each name present (never raises)."""
        lowered = b"\n" + block.lower()
        found: list[tuple[str, bytes]] = []
        for name, pattern in self.patterns:
            match = pattern.search(lowered)
            if match is None:
                continue
            start = match.end() - 1  # offsets in `lowered` are one past those in `block`
            end = _NEXT_FIELD.search(block, start)
            value = block[start : len(block) if end is None else end.start() + 1]
            found.append((name, _LINE_BREAKS.sub(b"", value).strip(b" \t")))
        return HeaderFields(tuple(found))


def parse_header_block(raw: bytes, limit: int = HEADER_BLOCK_LIMIT) -> HeaderFields:
    """Parse the header block at the start of `raw` (which may go on with a body).

    Raises SafetyLimit when the block exceeds `limit` bytes (64 KiB by default); a non-field
    line that ends the block early is counted in `malformed`.
    """
    bounds = header_bounds(raw, 0, None, limit)
    fields = parse_fields(raw[bounds.header_start : bounds.header_end])
    if bounds.separator_missing:
        return HeaderFields(fields.fields, fields.malformed + 1)
    return fields


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
