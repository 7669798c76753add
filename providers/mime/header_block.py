"""Header blocks over raw bytes: where a block ends, its fields, and its strict form.

The reader of mail is lenient: a block is the longest run of field and continuation lines
(CRLF or bare LF), a stray line ends it and is counted, and only an oversized block raises
(SafetyLimit). Drafts and IMAP header sections are read strictly on top of the same
delimiting: `strict_fields` names the first rule a block breaks.
"""

from __future__ import annotations

import re

from msgspec import Struct

from schemas.errors import SafetyLimit

HEADER_BLOCK_LIMIT = 64 * 1024

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


# --- the strict form --------------------------------------------------------------------------


class HeaderRefused(ValueError):
    """A header block outside the strict form; the message names the rule it breaks."""


class UnknownField(HeaderRefused):
    """A strict header block holds a field outside the allowed names."""


_NO_END = "a header block must end with an empty CRLF line within 64 KiB"
# Obsolete syntax (RFC 5322 §4.5): white space between a field name and its colon.
_SPACE_BEFORE_COLON = re.compile(rb"(?m)^[\x21-\x39\x3b-\x7e]+[ \t]+:")


def strict_fields(
    raw: bytes, start: int, end: int, allowed: frozenset[str]
) -> tuple[dict[str, bytes], int]:
    """Read the header block of raw[start:end] in its strict form; return fields and body start.

    Strict: every line is a field (no white space before its colon) or a continuation of one,
    lines end with CRLF, each field is one of `allowed` (lower-case names) and appears once,
    and an empty CRLF line ends the block within 64 KiB. The fields map lower-case names to
    unfolded values; anything else raises HeaderRefused (UnknownField for a foreign name).
    """
    try:
        bounds = header_bounds(raw, start, end)
    except SafetyLimit:
        raise HeaderRefused(_NO_END) from None
    if bounds.header_start != start or bounds.separator_missing:
        if bounds.header_end == start and raw.startswith((b" ", b"\t"), start, end):
            raise HeaderRefused("a header block must not start with a continuation line")
        raise HeaderRefused("every header line must be a field or a continuation")
    if bounds.body_start - bounds.header_end != 2:  # no empty line, or a bare LF one
        raise HeaderRefused(_NO_END)
    block = raw[start : bounds.header_end]
    unpaired = block.replace(b"\r\n", b"")
    if b"\r" in unpaired or b"\n" in unpaired:
        raise HeaderRefused("header lines must end with CRLF (no bare CR or LF)")
    if _SPACE_BEFORE_COLON.search(block):
        raise HeaderRefused("every header line must be a field or a continuation")
    fields: dict[str, bytes] = {}
    for name, value in parse_fields(block).fields:
        key = name.lower()
        if key not in allowed:
            raise UnknownField("a header field is not one of those allowed here")
        if key in fields:
            raise HeaderRefused("a header field appears more than once")
        fields[key] = value
    return fields, bounds.body_start
