"""Multipart bodies (RFC 2046 §5.1): one splitter that reports what it saw, for two readers.

The mail reader takes the parts and notes what is missing; the draft reader refuses anything
but the exact form our composer writes (no preamble, CRLF delimiter lines without padding,
no line that merely starts with the delimiter, a closing line and no epilogue).
"""

from __future__ import annotations

import re

from msgspec import Struct, field

# What may follow a delimiter (or a closing "--") on its line: transport padding, a line break.
_PADDING = re.compile(rb"[ \t]*\r?(?:\n|\Z)")


class Multipart(Struct):
    """The parts of a multipart body as (start, end) offsets, and what the split saw."""

    parts: list[tuple[int, int]] = field(default_factory=list)
    found: bool = False  # at least one delimiter line
    preamble: bool = False  # bytes before the first delimiter line
    closed: bool = False  # the closing delimiter line was reached
    full: bool = False  # the split stopped at `max_parts` before any closing line
    epilogue: bool = False  # bytes after the closing delimiter line
    exact: bool = True  # every delimiter line CRLF-framed without padding; no look-alike line


def split_multipart(
    raw: bytes, start: int, end: int, boundary: bytes, max_parts: int, *, strict: bool = False
) -> Multipart:
    """Split raw[start:end] at the delimiter lines of `boundary`, at most `max_parts` parts.

    A delimiter line starts at the body start or after a line feed; the line break before it
    belongs to it. Without a closing line the last part runs to `end`. `strict` stops at the
    first sign that the body is not in the exact form (a preamble, an inexact line), since
    its reader refuses it then.
    """
    delimiter = b"--" + boundary
    result = Multipart()
    position = floor = start
    part_start = -1
    while True:
        at = raw.find(delimiter, position, end)
        if at < 0:
            break
        position = at + 1
        if at != start and raw[at - 1] != 0x0A:
            continue
        after = at + len(delimiter)
        closing = raw.startswith(b"--", after, end)
        text_end = after + 2 if closing else after
        padding = _PADDING.match(raw, text_end, end)
        if padding is None:  # a line that starts with the delimiter but is not one
            result.exact = False
            if strict:
                return result
            continue
        part_end = _before_line_break(raw, at, floor)
        line_end = padding.end()
        crlf_after = line_end == text_end + 2 and raw.startswith(b"\r\n", text_end, end)
        crlf_before = at == start or part_end == at - 2
        if not (crlf_before and (crlf_after or (closing and line_end == text_end == end))):
            result.exact = False
        if part_start < 0:
            result.found, result.preamble = True, at != start
        if strict and (result.preamble or not result.exact):
            return result
        if part_start >= 0:
            result.parts.append((part_start, part_end))
            if len(result.parts) >= max_parts:
                result.full = True
                return result
        if closing:
            result.closed, result.epilogue = True, line_end < end
            return result
        part_start = position = floor = line_end
    if part_start >= 0:
        result.parts.append((part_start, end))
    return result


def _before_line_break(raw: bytes, at: int, floor: int) -> int:
    """Return the end of a part: the line break before its delimiter belongs to the delimiter."""
    if at - 2 >= floor and raw[at - 2 : at] == b"\r\n":
        return at - 2
    if at - 1 >= floor and raw[at - 1] == 0x0A:
        return at - 1
    return at
