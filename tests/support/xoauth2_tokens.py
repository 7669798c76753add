"""Access tokens for the XOAUTH2 rig, and a TokenSource that hands out the tokens a test gives it.

The rig's Dovecot and SMTP sink (scripts/test-services) accept an ES256 JWT signed by the
per-run key, from the rig's issuer, whose `sub` is the XOAUTH2 user and whose `exp` is in the
future. `RigMinter` mints such tokens with joserfc, and the ones each rule refuses.

`GivenTokens` is a test double of our own `TokenSource` protocol (the cache in front of a token
endpoint), not of anything on the wire: the servers that accept or refuse the tokens are real.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import ECKey

from providers.oauth2.source import AccessToken
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from support.services import XOAuth2Rig

NOT_A_JWT = "ya29.not-a-jwt-at-all"


class RigMinter:
    """Mints access tokens signed by the rig's key (or, for forgeries, by another one)."""

    def __init__(self, rig: XOAuth2Rig) -> None:
        self.rig = rig
        self._key = ECKey.import_key(rig.key_file.read_text(encoding="ascii"))

    def mint(
        self,
        sub: str,
        lifetime_s: int = 300,
        *,
        issuer: str | None = None,
        kid: str | None = None,
        key: ECKey | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> str:
        """A compact JWS access token for `sub`, expiring `lifetime_s` from now."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.rig.issuer if issuer is None else issuer,
            "sub": sub,
            "aud": "https://mail.example.test/",
            # Issued a little earlier, as issuers do for skew: with `iat` = this second, Dovecot
            # refused 2 of ~240 logins as "issued in future" (its clock reading can trail ours).
            "iat": now - 30,
            "exp": now + lifetime_s,
            "jti": uuid.uuid4().hex,
        }
        payload.update(claims or {})
        header = {"alg": "ES256", "typ": "JWT", "kid": self.rig.kid if kid is None else kid}
        return jwt.encode(header, payload, self._key if key is None else key)

    def valid(self, lifetime_s: int = 300) -> str:
        """A token the rig accepts for its user."""
        return self.mint(self.rig.user, lifetime_s)

    def expired(self) -> str:
        """A token for the rig's user that expired a minute ago."""
        return self.mint(self.rig.user, -60)

    def wrong_sub(self) -> str:
        """A valid token for somebody else."""
        return self.mint("mallory@example.test")

    def wrong_issuer(self) -> str:
        """A token for the rig's user from an issuer the rig does not trust."""
        return self.mint(self.rig.user, issuer="https://issuer.invalid")

    def foreign_key(self) -> str:
        """A token naming the rig's kid but signed by another key."""
        other = ECKey.import_key(ec.generate_private_key(ec.SECP256R1()))
        return self.mint(self.rig.user, key=other)


def fresh(value: str, generation: int) -> AccessToken:
    """A token as the cache hands it out right after fetching it."""
    return AccessToken(value=Secret(value), generation=generation, fresh=True)


def cached(value: str, generation: int) -> AccessToken:
    """A token as the cache hands it out from memory."""
    return AccessToken(value=Secret(value), generation=generation, fresh=False)


class GivenTokens:
    """A TokenSource handing out the given tokens in order, recording requests and invalidations."""

    recovery = "renew the test's tokens"

    def __init__(self, *tokens: AccessToken) -> None:
        self._tokens = list(tokens)
        self.requests = 0
        self.invalidated: list[int] = []

    async def token(self) -> AccessToken:
        """The next given token; ServiceUnavailable once they are used up."""
        self.requests += 1
        if not self._tokens:
            raise ServiceUnavailable("no access token left in this test")
        return self._tokens.pop(0)

    def invalidate(self, generation: int) -> None:
        """Record that a server refused the token of `generation`."""
        self.invalidated.append(generation)
