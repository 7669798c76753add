"""The one-time token that enrolls the owner's first passkey, and the hash the server keeps."""

from __future__ import annotations

import hashlib
import secrets

from service.wire.b64url import encode_b64url

TOKEN_BYTES = 32


def bootstrap_token_hash(token: str) -> str:
    """Lower-case hex SHA-256 of the token's encoded text: the value the server is given."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def new_bootstrap_token() -> tuple[str, str]:
    """Return a fresh token (unpadded base64url of 32 random bytes) and its hash."""
    token = encode_b64url(secrets.token_bytes(TOKEN_BYTES))
    return token, bootstrap_token_hash(token)
