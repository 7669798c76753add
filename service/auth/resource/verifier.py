"""From a bearer token to a Principal: parse, find the key, verify, decide on scopes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from schemas.scopes import BASE_SCOPE
from service.auth.resource.jwt import (
    Claims,
    TokenRejected,
    TokenRules,
    parse_token,
    verify_signature,
)
from service.auth.resource.key_cache import KeyCache
from service.auth.resource.profile import GrantCheck, check_profile
from service.principal import Principal, grant_binding


class AuthFailure(Exception):
    """A refused token: 401 invalid_token or 403 insufficient_scope, with the rule it broke."""

    def __init__(self, status: Literal[401, 403], rule: str) -> None:
        super().__init__(rule)
        self.status = status
        self.rule = rule  # for logs; never token text or claim values


class TokenVerifier:
    """Verify access tokens for one resource against one issuer's keys."""

    def __init__(
        self,
        rules: TokenRules,
        keys: KeyCache,
        clock: Callable[[], float] = time.time,
        grant_check: GrantCheck | None = None,
    ) -> None:
        self.rules = rules
        self.keys = keys
        self.clock = clock
        self.grant_check = grant_check  # set for tokens this server issues (first-party mode)

    async def principal(self, token: str) -> Principal:
        """Return the caller's Principal or raise AuthFailure."""
        try:
            # Every claim check runs before the key lookup: a malformed token never fetches.
            parsed = parse_token(token, self.rules, int(self.clock()))
            key = await self.keys.key_for(parsed.kid, parsed.alg)
            if key is None:
                raise AuthFailure(401, "unknown-kid")
            verify_signature(parsed, key)
        except TokenRejected as exc:
            raise AuthFailure(401, exc.rule) from None
        claims = parsed.claims
        if claims.expires <= int(self.clock()):  # the fetch may have outlived the token
            raise AuthFailure(401, "exp")
        grant = None
        if self.grant_check is not None:
            grant = grant_binding(await self._grant_active(claims))
        if BASE_SCOPE not in claims.scopes:
            raise AuthFailure(403, "scope")
        return Principal(
            claims.issuer, self.rules.resource, claims.subject, frozenset(claims.scopes), grant
        )

    async def _grant_active(self, claims: Claims) -> str:
        """Apply the first-party profile, then ask the grant store; revoked means 401 now.

        Return the token's grant ID, which the principal carries only as its binding.
        """
        try:
            gid, client_id = check_profile(claims)
        except TokenRejected as exc:
            raise AuthFailure(401, exc.rule) from None
        assert self.grant_check is not None
        if not await self.grant_check(gid, client_id, claims.subject, claims.scopes):
            raise AuthFailure(401, "grant")
        if claims.expires <= int(self.clock()):  # the store round trip may have outlived it
            raise AuthFailure(401, "exp")
        return gid
