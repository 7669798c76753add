"""Display cleaning for untrusted mail text: control characters out, UTF-8-safe byte cuts."""

from __future__ import annotations

import re

# Bidirectional embeddings, overrides and isolates can make displayed text lie about its order.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Controls str.split() does not treat as whitespace, lone surrogates (not UTF-8) and bidi marks.
_DROP_INLINE = re.compile(f"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff{_BIDI}]")
# Everything a text block drops: all C0/C1 controls but \n and \t, surrogates, bidi marks.
_DROP_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_BIDI}]")
_LINE_BREAKS = re.compile(r"\r\n?")


def cut_utf8(value: str, limit_bytes: int) -> str:
    """Cut valid text to at most `limit_bytes` UTF-8 bytes at a character boundary."""
    if len(value) * 4 <= limit_bytes:
        return value
    data = value.encode("utf-8")
    if len(data) <= limit_bytes:
        return value
    return data[:limit_bytes].decode("utf-8", "ignore")


def clean_line(value: str, limit_bytes: int) -> str:
    """Drop control characters, collapse all whitespace to single spaces, cut at `limit_bytes`."""
    return cut_utf8(" ".join(_DROP_INLINE.sub("", value).split()), limit_bytes)


def clean_block(value: str) -> str:
    """Normalize line breaks to \\n and drop every control character except \\n and \\t."""
    return _DROP_BLOCK.sub("", _LINE_BREAKS.sub("\n", value))
