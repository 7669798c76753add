"""Wire encodings for composed mail: RFC 2047 words, quoted-printable, base64, header folding.

Everything returns ASCII text or bytes with CRLF line ends; nothing here validates limits.
"""

from __future__ import annotations

import base64
import binascii
import re

_WORD_PAYLOAD_CHARS = 63  # 75-character encoded words minus "=?utf-8?q?" and "?="
_B_WORD_BYTES = 45  # 60 base64 characters
_PHRASE_LITERALS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!*+-/")
_TEXT_LITERALS = frozenset(chr(c) for c in range(0x21, 0x7F)) - frozenset("=?_")
_FOLD_COLUMNS = 78
_QP_LINE_CHARS = 76
# Bytes quoted-printable must escape: all but TAB, SPACE and printable ASCII other than "=";
# the line feed separates lines and stays.
_QP_ESCAPED = re.compile(rb"[^\t\n\x20-\x3c\x3e-\x7e]+")
_QP_TRAILING_SPACE = re.compile(rb" (?=\n|\Z)")
_QP_TRAILING_TAB = re.compile(rb"\t(?=\n|\Z)")
_QP_LONG_LINE = re.compile(rb"[^\n]{%d,}" % (_QP_LINE_CHARS + 1))
_BASE64_LINE_CHARS = 76


def _q_char(ch: str, literals: frozenset[str]) -> str:
    if ch == " ":
        return "_"
    if ch in literals:
        return ch
    return "".join(f"={byte:02X}" for byte in ch.encode("utf-8"))


def q_words(value: str, *, phrase: bool = False) -> str:
    """Encode `value` as space-separated RFC 2047 Q words of at most 75 characters.

    In a phrase (display name) only letters, digits and `!*+-/` stay literal (RFC 2047 §5).
    A character's bytes never straddle two words.
    """
    literals = _PHRASE_LITERALS if phrase else _TEXT_LITERALS
    words: list[str] = []
    current = ""
    for ch in value:
        piece = _q_char(ch, literals)
        if current and len(current) + len(piece) > _WORD_PAYLOAD_CHARS:
            words.append(current)
            current = ""
        current += piece
    words.append(current)
    return " ".join(f"=?utf-8?q?{word}?=" for word in words)


def b_words(value: str) -> str:
    """Encode `value` as space-separated RFC 2047 B words of at most 75 characters."""
    words: list[bytes] = []
    current = b""
    for ch in value:
        data = ch.encode("utf-8")
        if current and len(current) + len(data) > _B_WORD_BYTES:
            words.append(current)
            current = b""
        current += data
    words.append(current)
    return " ".join(f"=?utf-8?b?{base64.b64encode(word).decode('ascii')}?=" for word in words)


def subject_field(subject: str) -> str:
    """Write a subject verbatim when a parser reads it back unchanged, else as Q words."""
    plain = (
        all(0x20 <= ord(ch) <= 0x7E for ch in subject)
        and "=?" not in subject
        and not subject.startswith(" ")
        and not subject.endswith(" ")
    )
    return subject if plain else q_words(subject)


def fold_header(name: str, value: str) -> bytes:
    """Write `name: value` CRLF-terminated, folding only at existing spaces past 78 columns.

    A token is never split and the first token always stays on the name's line; the caller
    enforces the 998-byte line limit on the finished message.
    """
    out = [name, ":"]
    column = len(name) + 1
    for index, token in enumerate(value.split(" ")):
        if index > 0 and token and column + 1 + len(token) > _FOLD_COLUMNS:
            out.append("\r\n ")
            column = 1
        else:
            out.append(" ")
            column += 1
        out.append(token)
        column += len(token)
    out.append("\r\n")
    return "".join(out).encode("ascii")


def quoted_printable(text: str) -> bytes:
    """Encode LF-separated text as UTF-8 quoted-printable with CRLF lines of at most 76 chars.

    The whole text is transformed at once by regular expressions (escapes, a line's final
    space or tab, soft breaks in long lines), so a megabyte of short lines costs no Python
    loop per line.
    """
    encoded = _QP_ESCAPED.sub(_escaped_run, text.encode("utf-8"))
    encoded = _QP_TRAILING_TAB.sub(b"=09", _QP_TRAILING_SPACE.sub(b"=20", encoded))
    encoded = _QP_LONG_LINE.sub(_soft_breaks, encoded)
    return encoded.replace(b"\n", b"\r\n")


def _escaped_run(match: re.Match[bytes]) -> bytes:
    return b"=" + binascii.hexlify(match.group(0), b"=").upper()


def _soft_breaks(match: re.Match[bytes]) -> bytes:
    """Cut one encoded line longer than 76 characters into soft-broken pieces."""
    encoded = match.group(0)
    pieces: list[bytes] = []
    start = 0
    while len(encoded) - start > _QP_LINE_CHARS:
        cut = start + _QP_LINE_CHARS - 1
        # Never split an =XX escape; a literal "=" cannot occur, so any "=" starts one.
        if encoded[cut - 1] == 0x3D:
            cut -= 1
        elif encoded[cut - 2] == 0x3D:
            cut -= 2
        pieces.append(encoded[start:cut])
        start = cut
    pieces.append(encoded[start:])
    return b"=\n".join(pieces)


def base64_lines(data: bytes) -> bytes:
    """Encode bytes as standard base64 in CRLF-terminated lines of 76 characters."""
    encoded = base64.b64encode(data)
    return b"".join(
        encoded[start : start + _BASE64_LINE_CHARS] + b"\r\n"
        for start in range(0, len(encoded), _BASE64_LINE_CHARS)
    )
