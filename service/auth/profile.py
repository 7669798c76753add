"""The stricter profile of tokens this server issues itself, and the online grant check hook.

A first-party token must look exactly like what the authorization server signs (one audience,
a lifetime of at most 300 s, the grant and client it belongs to, canonical scopes); only a
token that passes is looked up in the grant store, so a malformed token never costs a Redis
round trip.
"""

from __future__ import annotations

import re
from typing import Final, Protocol

from service.auth.jwt import Claims, TokenRejected
from service.config._rules import SCOPE_ORDER

MAX_LIFETIME_S: Final = 300
MAX_ID_BYTES: Final = 512
_NO_WHITESPACE = re.compile(r"\S+")


class GrantCheck(Protocol):
    """Whether the grant a token names is still active (store failures answer False)."""

    async def __call__(
        self, gid: str, client_id: str, subject: str, scopes: tuple[str, ...]
    ) -> bool:
        """Tell whether the grant exists, is unexpired and covers the client and scopes."""
        ...


def check_profile(claims: Claims) -> tuple[str, str]:
    """Return (gid, client_id) of a well-formed first-party token, or raise TokenRejected."""
    if not claims.audience_is_string:
        raise TokenRejected("fp-aud")
    if claims.issued_at is None or claims.expires - claims.issued_at > MAX_LIFETIME_S:
        raise TokenRejected("fp-lifetime")
    for name, value in (("jti", claims.jti), ("gid", claims.gid), ("client_id", claims.client_id)):
        if value is None or not _identifier(value):
            raise TokenRejected(f"fp-{name}")
    scopes = claims.scopes
    if not 1 <= len(scopes) <= len(SCOPE_ORDER) or len(set(scopes)) != len(scopes):
        raise TokenRejected("fp-scope")
    if any(scope not in SCOPE_ORDER for scope in scopes):
        raise TokenRejected("fp-scope")
    assert claims.gid is not None and claims.client_id is not None
    return claims.gid, claims.client_id


def _identifier(value: str) -> bool:
    return 1 <= len(value.encode("utf-8")) <= MAX_ID_BYTES and bool(_NO_WHITESPACE.fullmatch(value))
