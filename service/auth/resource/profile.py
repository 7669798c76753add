"""The access-token profile of first-party tokens: built by the issuer, checked by the verifier.

A first-party token must look exactly like what the authorization server signs (one audience,
a lifetime of at most `ACCESS_TOKEN_TTL_S`, the grant and client it belongs to, canonical
scopes); only a token that passes is looked up in the grant store, so a malformed token never
costs a Redis round trip. Both sides read this one module, so they cannot drift apart.
"""

from __future__ import annotations

import re
import secrets
from typing import Final, Literal, Protocol

import msgspec

from schemas.scopes import SCOPE_ORDER, Scope
from service.auth.resource.jwt import Claims, TokenRejected

ACCESS_TOKEN_TTL_S: Final = 300
MAX_ID_BYTES: Final = 512
_NO_WHITESPACE = re.compile(r"\S+")


class AccessTokenClaims(msgspec.Struct, frozen=True, kw_only=True):
    """The claim set of an issued access token, in the order it is encoded."""

    iss: str
    aud: str
    sub: str
    iat: int
    exp: int
    jti: str
    scope: str
    gid: str
    client_id: str
    token_use: Literal["access"] = "access"


class GrantCheck(Protocol):
    """Whether the grant a token names is still active (store failures answer False)."""

    async def __call__(
        self, gid: str, client_id: str, subject: str, scopes: tuple[str, ...]
    ) -> bool:
        """Tell whether the grant exists, is unexpired and covers the client and scopes."""
        ...


def claims_for(
    *,
    issuer: str,
    resource: str,
    subject: str,
    gid: str,
    client_id: str,
    scopes: tuple[Scope, ...],
    grant_expires: int,
    now: int,
) -> AccessTokenClaims:
    """The claims of a new access token: it never outlives its grant, nor `ACCESS_TOKEN_TTL_S`."""
    return AccessTokenClaims(
        iss=issuer,
        aud=resource,
        sub=subject,
        iat=now,
        exp=min(now + ACCESS_TOKEN_TTL_S, grant_expires),
        jti=secrets.token_urlsafe(32),
        scope=" ".join(scopes),
        gid=gid,
        client_id=client_id,
    )


def check_profile(claims: Claims) -> tuple[str, str]:
    """Return (gid, client_id) of a well-formed first-party token, or raise TokenRejected."""
    if not claims.audience_is_string:
        raise TokenRejected("fp-aud")
    if claims.issued_at is None or claims.expires - claims.issued_at > ACCESS_TOKEN_TTL_S:
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
