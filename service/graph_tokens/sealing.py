"""The stored form of a Graph refresh token: `v1.` + unpadded base64url(nonce ‖ AES-256-GCM
ciphertext and tag), with the record key as associated data, at most 24 KiB.

The associated data binds a record to its key: a record copied under another key does not open.
"""

from __future__ import annotations

import re
import secrets
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from providers.oauth2.refresh import MAX_TOKEN_BYTES, REFRESH_TOKEN_SYNTAX
from schemas.secret import Secret
from service.wire.b64url import decode_b64url, encode_b64url

VERSION: Final = "v1."
MAX_RECORD_BYTES: Final = 24 * 1024
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
_HEX_KEY: Final = re.compile(r"[0-9a-fA-F]{64}")


class SealBroken(ValueError):
    """A stored record does not open: malformed, too large, sealed under another key or altered."""


class TokenSealer:
    """Seals and opens refresh tokens under one 32-byte key (the key never leaves this object)."""

    __slots__ = ("_aead",)

    def __init__(self, key: Secret) -> None:
        if _HEX_KEY.fullmatch(key.reveal()) is None:
            raise ValueError("the token encryption key must be 64 hex characters (32 bytes)")
        self._aead = AESGCM(bytes.fromhex(key.reveal()))

    def __repr__(self) -> str:
        return "TokenSealer(...)"

    def seal(self, token: Secret, record_key: str) -> str:
        """The stored form of `token` under `record_key`."""
        text = token.reveal()  # what a provider may return: printable ASCII, at most 16 KiB
        if len(text) > MAX_TOKEN_BYTES or REFRESH_TOKEN_SYNTAX.fullmatch(text) is None:
            raise SealBroken("the refresh token cannot be stored")
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, text.encode("ascii"), record_key.encode())
        record = VERSION + encode_b64url(nonce + sealed)
        if len(record) > MAX_RECORD_BYTES:
            raise SealBroken("the refresh token is too large to store")
        return record

    def open(self, record: str, record_key: str) -> Secret:
        """The refresh token in `record`, or SealBroken."""
        if len(record) > MAX_RECORD_BYTES or not record.startswith(VERSION):
            raise SealBroken("the stored record is malformed")
        raw = decode_b64url(record[len(VERSION) :])
        if raw is None or len(raw) < NONCE_BYTES + TAG_BYTES:
            raise SealBroken("the stored record is malformed")
        try:
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], record_key.encode())
        except InvalidTag:
            failed = True
        else:
            failed = False
        if failed:  # raised outside the except block: nothing of the record rides along
            raise SealBroken("the stored record does not open with this key")
        token = plain.decode("latin-1")  # any bytes decode; the syntax check refuses the rest
        if len(plain) > MAX_TOKEN_BYTES or REFRESH_TOKEN_SYNTAX.fullmatch(token) is None:
            raise SealBroken("the stored record holds no usable refresh token")
        return Secret(token)
