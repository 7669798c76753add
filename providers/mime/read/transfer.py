"""Content-Transfer-Encoding decoding: base64, quoted-printable and the identity encodings."""

from __future__ import annotations

import binascii

from providers.mime.base64_decoding import decode_lenient, decode_strict, lenient_size

IDENTITY_ENCODINGS = frozenset({"", "7bit", "8bit", "binary"})

_LINE_SPACE = b" \t\r\n"


class TransferDecodeError(ValueError):
    """The body cannot be decoded: an unsupported encoding or corrupt encoded data."""


def normalize_encoding(value: str) -> str:
    """Return a Content-Transfer-Encoding value as a lowercase token ("" when absent)."""
    return value.strip().strip('"').strip().lower()


def decode_body(body: bytes | memoryview, encoding: str, *, strict: bool) -> bytes:
    """Transfer-decode a part body (no charset conversion); raise TransferDecodeError.

    Strict decoding (attachment retrieval) ignores spaces and line breaks but refuses any
    other corrupt base64: characters outside the alphabet, wrong padding or data after the
    padding. Lenient decoding (display and sizes) ignores every byte outside the alphabet.
    """
    if encoding in IDENTITY_ENCODINGS:
        return bytes(body)
    if encoding == "quoted-printable":
        return binascii.a2b_qp(body)
    if encoding != "base64":
        raise TransferDecodeError("unsupported transfer encoding")
    if not strict:
        return decode_lenient(body)
    try:
        return decode_strict(bytes(body).translate(None, _LINE_SPACE))
    except ValueError:
        raise TransferDecodeError("corrupt base64 data") from None


def decoded_size(body: bytes | memoryview, encoding: str) -> int:
    """Return the lenient transfer-decoded size; base64 and identity bodies are not copied whole."""
    if encoding in IDENTITY_ENCODINGS:
        return len(body)
    if encoding == "base64":
        return lenient_size(body)
    return len(decode_body(body, encoding, strict=False))
