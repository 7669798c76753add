"""Content-Transfer-Encoding decoding: base64, quoted-printable and the identity encodings."""

from __future__ import annotations

import binascii

IDENTITY_ENCODINGS = frozenset({"", "7bit", "8bit", "binary"})

_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NOT_BASE64 = bytes(set(range(256)) - set(_BASE64_ALPHABET))
_LINE_SPACE = b" \t\r\n"
_CHUNK = 1024 * 1024


class TransferDecodeError(ValueError):
    """The body cannot be decoded: an unsupported encoding or corrupt encoded data."""


def normalize_encoding(value: str) -> str:
    """Return a Content-Transfer-Encoding value as a lowercase token ("" when absent)."""
    return value.strip().strip('"').strip().lower()


def decode_body(body: bytes | memoryview, encoding: str, *, strict: bool) -> bytes:
    """Transfer-decode a part body (no charset conversion); raise TransferDecodeError.

    Strict decoding (attachment retrieval) refuses corrupt base64: characters outside the
    alphabet, wrong padding or data after the padding. Lenient decoding (display and sizes)
    ignores every byte outside the alphabet and completes a cut final group; both agree on
    valid data.
    """
    if encoding in IDENTITY_ENCODINGS:
        return bytes(body)
    if encoding == "quoted-printable":
        return binascii.a2b_qp(body)
    if encoding != "base64":
        raise TransferDecodeError("unsupported transfer encoding")
    if strict:
        try:
            return binascii.a2b_base64(bytes(body).translate(None, _LINE_SPACE), strict_mode=True)
        except binascii.Error:
            raise TransferDecodeError("corrupt base64 data") from None
    return _base64_lenient(body)


def _base64_lenient(body: bytes | memoryview) -> bytes:
    """Decode base64 ignoring every non-alphabet byte (padding included), 1 MiB at a time."""
    out = bytearray()
    carry = b""
    for offset in range(0, len(body), _CHUNK):
        piece = carry + bytes(body[offset : offset + _CHUNK]).translate(None, _NOT_BASE64)
        usable = len(piece) - len(piece) % 4
        out += binascii.a2b_base64(piece[:usable])
        carry = piece[usable:]
    if len(carry) >= 2:  # a lone final sextet carries no whole byte
        out += binascii.a2b_base64(carry + b"=" * (4 - len(carry)))
    return bytes(out)


def decoded_size(body: bytes | memoryview, encoding: str) -> int:
    """Return the lenient transfer-decoded size; base64 and identity bodies are not copied whole."""
    if encoding in IDENTITY_ENCODINGS:
        return len(body)
    if encoding == "base64":
        others = sum(
            len(bytes(body[offset : offset + _CHUNK]).translate(None, _BASE64_ALPHABET))
            for offset in range(0, len(body), _CHUNK)
        )
        sextets = len(body) - others
        return sextets // 4 * 3 + max(0, sextets % 4 - 1)
    return len(decode_body(body, encoding, strict=False))
