"""AES-256-GCM sealing under a key derived (HKDF-SHA256) from a secret: the one construction the
authorization server uses for its stored grant IDs and its visitor cookies.

A sealed value is the 96-bit random nonce followed by the ciphertext and its 16-byte tag; what a
caller authenticates beside it (a purpose, a label) is the associated data.
"""

from __future__ import annotations

import secrets
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16


class Sealer:
    """Seals and opens bytes under one derived key (the key never leaves this object)."""

    __slots__ = ("_aead",)

    def __init__(self, secret: bytes, label: bytes) -> None:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(secret)
        self._aead = AESGCM(derived)

    def __repr__(self) -> str:
        return "Sealer(...)"

    def seal(self, plain: bytes, associated: bytes) -> bytes:
        """Nonce, ciphertext and tag of `plain`, with `associated` authenticated beside it."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plain, associated)

    def open(self, sealed: bytes, associated: bytes) -> bytes | None:
        """The plain bytes, or None when the value is too short, forged or sealed otherwise."""
        if len(sealed) < NONCE_BYTES + TAG_BYTES:
            return None
        try:
            return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], associated)
        except InvalidTag:
            return None
