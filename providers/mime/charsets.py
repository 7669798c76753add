"""Charset lookup and decoding for mail text: declared names → Python text codecs, never raising."""

from __future__ import annotations

import codecs

# Labels mail clients use that Python lacks or that a superset decodes better (the same
# choices browsers make: ISO-8859-1 and ASCII labels are really windows-1252 in the wild).
_ALIASES: dict[str, str] = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "euc-cn": "gb18030",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "windows-31j": "cp932",
    "ks_c_5601-1987": "cp949",
    "euc-kr": "cp949",
    "iso-8859-8-i": "iso8859_8",
    "iso-8859-6-i": "iso8859_6",
    "tis-620": "cp874",
    "windows-874": "cp874",
}

# Text codecs Python has that are not charsets: they interpret escapes or rewrite domains.
_REFUSED = frozenset(
    {"unicode_escape", "raw_unicode_escape", "punycode", "idna", "undefined", "mbcs", "oem"}
)

# Declared as (or defaulting to) ASCII: 8bit bytes are then most likely UTF-8, else windows-1252.
_ASCII_NAMES = frozenset({"us-ascii", "ascii", "ansi_x3.4-1968", "us", "646", "iso646-us"})


def resolve_charset(name: str | None) -> str | None:
    """Map a declared charset label to a Python text codec name, or None when unknown/refused."""
    if name is None:
        return "ascii"
    label = name.strip().strip('"').strip().lower()
    if not label or len(label) > 64:
        return None if label else "ascii"
    if label in _ASCII_NAMES:
        return "ascii"
    label = _ALIASES.get(label, label)
    try:
        info = codecs.lookup(label)
        b"".decode(info.name)  # non-text codecs (base64, zlib, ...) refuse here
    except (LookupError, ValueError):
        return None
    if info.name in _REFUSED:
        return None
    return info.name


def decode_text(data: bytes, charset: str | None) -> tuple[str, bool]:
    """Decode bytes declared in `charset`; return the text and whether the charset was known.

    Unknown charsets decode as UTF-8 when that works, else as ASCII with replacement
    characters; undecodable bytes in a known charset become replacement characters.
    """
    codec = resolve_charset(charset)
    if codec == "ascii":
        return _loose_text(data), True
    if codec is None:
        try:
            return data.decode("utf-8"), False
        except UnicodeDecodeError:
            return data.decode("ascii", "replace"), False
    try:
        return data.decode(codec, "replace"), True
    except (LookupError, ValueError):  # a codec that cannot even replace
        return data.decode("ascii", "replace"), False


def _loose_text(data: bytes) -> str:
    """Decode bytes that should be ASCII: UTF-8 when valid, else windows-1252 with replacements."""
    if data.isascii():
        return data.decode("ascii")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")


def loose_text(data: bytes | str) -> str:
    """Turn raw header bytes into text (UTF-8 when valid, else windows-1252); str passes through."""
    if isinstance(data, str):
        return data
    return _loose_text(data)
