"""Base64 decoding for mail: one strict and one lenient decoder, and the lenient decoded size.

Strict decoding (attachment retrieval, drafts, caller files, strict encoded words) accepts
exactly padded alphabet data; each caller first removes the line breaks its format allows.
Lenient decoding (display, sizes, encoded words in headers) ignores every byte outside the
alphabet and completes a cut final group; both agree on valid data.
"""

from __future__ import annotations

import binascii

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NOT_ALPHABET = bytes(set(range(256)) - set(_ALPHABET))
_CHUNK = 1024 * 1024


def decode_strict(data: bytes, *, canonical: bool = False) -> bytes:
    """Decode padded base64 with nothing outside the alphabet or after the padding.

    `canonical` also refuses unused trailing bits that are not zero, so that the input is the
    only encoding of its bytes. Raise ValueError for anything else.
    """
    try:
        decoded = binascii.a2b_base64(data, strict_mode=True)
    except binascii.Error:
        raise ValueError("not strict base64") from None
    if canonical and binascii.b2a_base64(decoded, newline=False) != data:
        raise ValueError("not canonical base64")
    return decoded


def decode_lenient(data: bytes | memoryview) -> bytes:
    """Decode base64 ignoring every non-alphabet byte (padding included), 1 MiB at a time."""
    out = bytearray()
    carry = b""
    for offset in range(0, len(data), _CHUNK):
        piece = carry + bytes(data[offset : offset + _CHUNK]).translate(None, _NOT_ALPHABET)
        usable = len(piece) - len(piece) % 4
        out += binascii.a2b_base64(piece[:usable])
        carry = piece[usable:]
    if len(carry) >= 2:  # a lone final sextet carries no whole byte
        out += binascii.a2b_base64(carry + b"=" * (4 - len(carry)))
    return bytes(out)


def lenient_size(data: bytes | memoryview) -> int:
    """Return the length decode_lenient would return, without building the decoded bytes."""
    others = sum(
        len(bytes(data[offset : offset + _CHUNK]).translate(None, _ALPHABET))
        for offset in range(0, len(data), _CHUNK)
    )
    sextets = len(data) - others
    return sextets // 4 * 3 + max(0, sextets % 4 - 1)
