"""Unpadded base64url: the one encoder, and the strict decoder of the token and key-set parsers."""

from __future__ import annotations

import base64
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def encode_b64url(data: bytes) -> str:
    """Unpadded base64url text of bytes."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode_b64url(text: str) -> bytes | None:
    """Decode unpadded base64url, or return None for padding, foreign characters or spare bits."""
    if len(text) % 4 == 1 or _ALPHABET.fullmatch(text) is None:
        return None
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    # Unused low bits in the last character must be zero: only one spelling per byte string.
    if encode_b64url(data) != text:
        return None
    return data


def encodes_bytes(text: str, size: int) -> bool:
    """Tell whether `text` is the canonical unpadded base64url spelling of exactly `size` bytes."""
    if len(text) != -(-size * 4 // 3):
        return False
    raw = decode_b64url(text)
    return raw is not None and len(raw) == size
