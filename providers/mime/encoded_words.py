"""RFC 2047 encoded words in header values: one decoder, lenient for mail, strict for drafts.

Both modes join adjacent words in the same charset before decoding (so a character split
across words survives) and drop the white space between adjacent words. They differ only in
what a bad word does: the lenient reader keeps it as written or decodes with replacement
characters; the strict reader refuses it.
"""

from __future__ import annotations

import re

from providers.mime.base64_decoding import decode_lenient, decode_strict
from providers.mime.charsets import decode_text, loose_text, resolve_charset

_ENCODED_WORD = re.compile(r"=\?([^?\s*]+)(?:\*[^?\s]*)?\?([BbQq])\?([^?\s]*)\?=")
_Q_ESCAPE = re.compile(rb"=([0-9A-Fa-f]{2})")
_BAD_Q_ESCAPE = re.compile(rb"=(?![0-9A-Fa-f]{2})")
# RFC 2047 §6.2: linear white space between adjacent encoded words is not displayed.
_BETWEEN_WORDS = re.compile(r"[ \t\r\n]*")


class WordError(ValueError):
    """Strict decoding refused an encoded word; the message says why, after a field name."""


def decode_words(value: bytes | str, *, strict: bool = False) -> str:
    """Decode the RFC 2047 words (B or Q, any charset) in a header value.

    Lenient (the default) never raises: an unknown charset or undecodable bytes give
    replacement characters, and a word whose payload is unusable stays as written. Strict
    raises WordError for a malformed payload, an unknown charset or bytes that do not decode.
    """
    text = loose_text(value)
    if "=?" not in text:
        return text
    out: list[str] = []
    pending: list[bytes] = []
    pending_charset = ""
    position = 0

    def flush() -> None:
        if pending:
            out.append(_decoded(b"".join(pending), pending_charset, strict))
            pending.clear()

    for match in _ENCODED_WORD.finditer(text):
        between = text[position : match.start()]
        position = match.end()
        data = _payload(match.group(2), match.group(3), strict)
        if data is None:
            flush()
            out.append(between + match.group(0))
            continue
        charset = match.group(1).lower()
        adjacent = bool(pending) and _BETWEEN_WORDS.fullmatch(between) is not None
        if adjacent and charset == pending_charset:
            pending.append(data)
            continue
        flush()
        if not adjacent:
            out.append(between)
        pending.append(data)
        pending_charset = charset
    flush()
    out.append(text[position:])
    return "".join(out)


def _payload(encoding: str, payload: str, strict: bool) -> bytes | None:
    """Return the bytes a word carries; None (lenient) or WordError (strict) when unusable."""
    try:
        data = payload.encode("ascii")
    except UnicodeEncodeError:
        if strict:
            raise WordError("has a malformed RFC 2047 word") from None
        return None
    if encoding in "Qq":
        if strict and _BAD_Q_ESCAPE.search(data):
            raise WordError("has a malformed RFC 2047 word")
        return _Q_ESCAPE.sub(lambda m: bytes((int(m.group(1), 16),)), data.replace(b"_", b" "))
    if not strict:
        return decode_lenient(data)
    try:
        return decode_strict(data)
    except ValueError:
        raise WordError("has a malformed RFC 2047 word") from None


def _decoded(data: bytes, charset: str, strict: bool) -> str:
    """Decode the joined bytes of adjacent words in one charset."""
    if not strict:
        return decode_text(data, charset)[0]
    codec = resolve_charset(charset)
    if codec is None:
        raise WordError("uses an unknown RFC 2047 charset")
    try:
        return data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        raise WordError("has an RFC 2047 word that does not decode") from None
