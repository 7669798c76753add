"""Content-Transfer-Encoding decoding: base64, quoted-printable and the identity encodings."""

from __future__ import annotations

import binascii

IDENTITY_ENCODINGS = frozenset({"", "7bit", "8bit", "binary"})
SUPPORTED_ENCODINGS = IDENTITY_ENCODINGS | {"base64", "quoted-printable"}

_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NOT_BASE64 = bytes(set(range(256)) - set(_BASE64_ALPHABET))
_LINE_SPACE = b" \t\r\n"


class TransferDecodeError(ValueError):
    """The body cannot be decoded: an unsupported encoding or corrupt encoded data."""


def normalize_encoding(value: str) -> str:
    """Return a Content-Transfer-Encoding value as a lowercase token ("" when absent)."""
    return value.strip().strip('"').strip().lower()


def decode_body(body: bytes | memoryview, encoding: str, *, strict: bool) -> bytes:
    """Transfer-decode a part body (no charset conversion); raise TransferDecodeError.

    Strict decoding (attachment retrieval) refuses corrupt base64: characters outside the
    alphabet, wrong padding or data after the padding. Lenient decoding (display) ignores
    stray characters and repairs the padding, as mail clients do.
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
    try:
        return binascii.a2b_base64(body)
    except binascii.Error:
        data = bytes(body).translate(None, _NOT_BASE64)
        if len(data) % 4 == 1:  # one stray sextet carries no whole byte
            data = data[:-1]
        return binascii.a2b_base64(data + b"=" * (-len(data) % 4))


def decoded_size(body: bytes | memoryview, encoding: str) -> int:
    """Return the lenient transfer-decoded size without copying identity bodies."""
    if encoding in IDENTITY_ENCODINGS:
        return len(body)
    return len(decode_body(body, encoding, strict=False))
