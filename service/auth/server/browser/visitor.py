"""The anonymous visitor: everything about it rides in its sealed cookie, nothing in the store.

Until a passkey ceremony begins nothing is stored for a visitor: a bare `/oauth/authorize` or
`/oauth/login` only sets the cookie `__Host-angelos` to a sealed VisitorCookie holding a random
visitor ID (the ceremony's challenge is bound to its SHA-256), the visitor's CSRF value, its end
(10 minutes after the latest page) and the pending authorization request when it came through
`/oauth/authorize`. A signed-in session's cookie is a 43-character token naming its record in
the store; a visitor cookie starts with `v1.`.

The seal is AES-256-GCM under a key derived (HKDF-SHA256) from the token signing key, with a
random 96-bit nonce and a fixed label as associated data, so every instance sharing the signing
key opens every other's cookies, a changed or forged cookie is refused, and rotating the signing
key only ends the visits under way. A cookie that does not open, or is over, is no visit.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec
from cryptography.hazmat.primitives.asymmetric import ec

from service.auth.server.store.keys import new_token
from service.auth.server.store.records import ConsentRequest
from service.wire.b64url import decode_b64url, encode_b64url
from service.wire.sealing import Sealer

PREFIX: Final = "v1."
LIFETIME_S: Final = 10 * 60
MAX_COOKIE_CHARS: Final = 4000  # with the name, under the 4096 bytes every browser keeps
_LABEL: Final = b"angelos:oauth:visitor-cookie:v1"


class VisitorCookie(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """What a visitor's cookie holds (never stored server-side)."""

    v: Literal[1]
    id: str  # random; challenges of this visitor are bound to its SHA-256
    csrf: str
    expires_unix: int
    pending: ConsentRequest | None = None  # the validated authorization request, if any

    def __repr__(self) -> str:  # the ID and the CSRF value stay out of logs
        pending = self.pending is not None
        return f"VisitorCookie(expires_unix={self.expires_unix}, pending={pending})"


class VisitorSeal:
    """Seals and opens visitor cookies under a key derived from the signing key."""

    __slots__ = ("_sealer",)

    def __init__(self, signing_key: ec.EllipticCurvePrivateKey) -> None:
        scalar = signing_key.private_numbers().private_value.to_bytes(32, "big")
        self._sealer = Sealer(scalar, _LABEL)

    def __repr__(self) -> str:
        return "VisitorSeal(...)"

    @staticmethod
    def fresh(now: int, pending: ConsentRequest | None = None) -> VisitorCookie:
        """A new visitor (new ID and CSRF value) ending 10 minutes from now."""
        return VisitorCookie(1, new_token(), new_token(), now + LIFETIME_S, pending)

    @staticmethod
    def renewed(visitor: VisitorCookie, now: int, pending: ConsentRequest | None) -> VisitorCookie:
        """The same visitor (ID and CSRF kept) with this pending request, for 10 more minutes."""
        return msgspec.structs.replace(visitor, expires_unix=now + LIFETIME_S, pending=pending)

    def seal(self, visitor: VisitorCookie) -> str | None:
        """The cookie value, or None when it would be too long for a browser to keep."""
        value = PREFIX + encode_b64url(self._sealer.seal(msgspec.msgpack.encode(visitor), _LABEL))
        return value if len(value) <= MAX_COOKIE_CHARS else None

    def open(self, value: str, now: int) -> VisitorCookie | None:
        """The visitor a cookie value holds, or None (not a visitor cookie, forged, over)."""
        if not value.startswith(PREFIX) or len(value) > MAX_COOKIE_CHARS:
            return None
        raw = decode_b64url(value[len(PREFIX) :])
        plain = None if raw is None else self._sealer.open(raw, _LABEL)
        if plain is None:
            return None
        try:
            visitor = msgspec.msgpack.decode(plain, type=VisitorCookie)
        except msgspec.DecodeError:
            return None
        return visitor if now < visitor.expires_unix else None
