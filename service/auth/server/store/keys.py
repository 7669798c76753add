"""Key names under the owner namespace, secret hashing and the sealing of values bound to a secret.

Secrets (session cookies, codes, refresh tokens, grant IDs, request IDs) never reach Redis raw:
keys and hash fields carry their SHA-256. A value that must come back later but may not be stored
raw (the grant ID behind a code or refresh token, the pending request behind a session) is sealed:
encrypted with AES-256-GCM under a key derived (HKDF-SHA256) from the secret that unlocks it, with
a random 96-bit nonce and the purpose label as associated data, so a changed seal, another key or
another purpose is refused.

A seal is unpadded base64url of 0x02 ‖ nonce ‖ ciphertext and tag (61 bytes, 82 characters).
Before AES-GCM a seal was the 32 bytes XORed with SHA-256 of the purpose and the secret (43
characters): unseal still opens those, so records written before the upgrade stay usable until
they expire (at most the 30-day grant lifetime, for refresh tokens); seal never writes them.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final

from service.wire.b64url import decode_b64url, encode_b64url
from service.wire.sealing import NONCE_BYTES, TAG_BYTES, Sealer

from .errors import StoreCorrupt

TOKEN_BYTES: Final = 32
HANDLE_LENGTH: Final = 64
SEAL_VERSION: Final = b"\x02"  # the AES-GCM seal; the older XOR seal has no version byte
SEALED_BYTES: Final = len(SEAL_VERSION) + NONCE_BYTES + TOKEN_BYTES + TAG_BYTES


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


def _sealer(key: str) -> Sealer:
    return Sealer(key.encode(), b"angelos:oauth:seal:aes-256-gcm")


def _associated(purpose: str) -> bytes:
    return f"angelos:oauth:seal:{purpose}".encode()


def _xor_pad(purpose: str, key: str) -> bytes:
    """The pad of the XOR seal written before AES-GCM (unseal only)."""
    return hashlib.sha256(f"angelos:oauth:seal:{purpose}\0{key}".encode()).digest()


def seal(value: str, *, purpose: str, key: str) -> str:
    """Seal a 43-character token under another secret (AES-256-GCM, the purpose authenticated)."""
    raw = decode_b64url(value)
    if raw is None or len(raw) != TOKEN_BYTES:
        raise ValueError("only 32-byte base64url tokens can be sealed")
    return _encode(SEAL_VERSION + _sealer(key).seal(raw, _associated(purpose)))


def unseal(sealed: str, *, purpose: str, key: str) -> str:
    """Open a value sealed by seal() (or by the XOR seal before it); a malformed stored value,
    or one that does not open under this key and purpose, is corrupt state."""
    raw = decode_b64url(sealed)
    if raw is not None and len(raw) == TOKEN_BYTES:  # an XOR seal from before AES-GCM
        return _encode(bytes(a ^ b for a, b in zip(raw, _xor_pad(purpose, key), strict=True)))
    if raw is None or len(raw) != SEALED_BYTES or raw[:1] != SEAL_VERSION:
        raise StoreCorrupt("a sealed value in the OAuth store is malformed")
    opened = _sealer(key).open(raw[1:], _associated(purpose))
    if opened is None:
        raise StoreCorrupt("a sealed value in the OAuth store does not open")
    return _encode(opened)


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
