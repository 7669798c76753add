"""Key names under the owner namespace, secret hashing and the sealing of values bound to a secret.

Secrets (session cookies, codes, refresh tokens, grant IDs, request IDs) never reach Redis raw:
keys and hash fields carry their SHA-256. A value that must come back later but may not be stored
raw (the grant ID behind a code or refresh token, the pending request behind a session) is sealed:
XORed with SHA-256 of a purpose label and the secret that unlocks it. The unlocking secret is 32
random bytes used for one record only, so the pad is never reused.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final

from service.wire.b64url import decode_b64url, encode_b64url

from .errors import StoreCorrupt

TOKEN_BYTES: Final = 32
HANDLE_LENGTH: Final = 64


def _encode(data: bytes) -> str:
    return encode_b64url(data)


def sha256_hex(value: str) -> str:
    """Return the lowercase hex SHA-256 of a UTF-8 string."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    """Return 32 random bytes as unpadded base64url (43 characters)."""
    return _encode(secrets.token_bytes(TOKEN_BYTES))


def is_handle(value: str) -> bool:
    """Say whether a string is a record handle: 64 lowercase hex digits."""
    return len(value) == HANDLE_LENGTH and all(c in "0123456789abcdef" for c in value)


def _pad(purpose: str, key: str) -> bytes:
    return hashlib.sha256(f"angelos:oauth:seal:{purpose}\0{key}".encode()).digest()


def seal(value: str, *, purpose: str, key: str) -> str:
    """Seal a 43-character token under another secret (XOR with a one-time pad derived from it)."""
    raw = decode_b64url(value)
    if raw is None or len(raw) != TOKEN_BYTES:
        raise ValueError("only 32-byte base64url tokens can be sealed")
    return _encode(bytes(a ^ b for a, b in zip(raw, _pad(purpose, key), strict=True)))


def unseal(sealed: str, *, purpose: str, key: str) -> str:
    """Open a value sealed by seal(); a malformed stored value is corrupt state."""
    raw = decode_b64url(sealed)
    if raw is None or len(raw) != TOKEN_BYTES:
        raise StoreCorrupt("a sealed value in the OAuth store is malformed")
    return _encode(bytes(a ^ b for a, b in zip(raw, _pad(purpose, key), strict=True)))


class OAuthKeys:
    """Every key of one owner's namespace: angelos:oauth:{<hex SHA-256(subject)>}:v1:<suffix>."""

    __slots__ = ("prefix",)

    def __init__(self, owner_subject: str) -> None:
        # The braces are a Redis Cluster hash tag: all of an owner's keys share one slot, which
        # the multi-key scripts need.
        self.prefix: Final = f"angelos:oauth:{{{sha256_hex(owner_subject)}}}:v1:"

    @property
    def owner(self) -> str:
        return self.prefix + "owner"

    @property
    def bootstrap_disabled(self) -> str:
        return self.prefix + "bootstrap-disabled"

    @property
    def grants(self) -> str:
        return self.prefix + "grants"

    def bucket(self, bucket: str, handle: str) -> str:
        """Return the key of one record in a hashed bucket (session, code, rate, ...)."""
        if bucket not in _BUCKETS or not is_handle(handle):
            raise ValueError("unknown OAuth bucket or malformed handle")
        return f"{self.prefix}{bucket}:{handle}"


_BUCKETS: Final = frozenset(
    [
        "session",
        "challenge",
        "consent",
        "code",
        "bootstrap",
        "credential",
        "rate",
        "refresh",
        "family",
    ]
)
