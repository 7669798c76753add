"""The two grants of /oauth/token, from a validated request to the token response.

A code is read, checked (client, redirect, PKCE, its grant) and charged to the grant's budget
before it is consumed, and consumed only if it is still the very record that was checked: a
wrong verifier does not burn a good code, a rate-limited exchange leaves it redeemable, and
of two racing exchanges one wins. A code presented after its redemption revokes the grant it
made, and with it the tokens of the first redemption. Refresh rotation is one atomic step in
the store.
A refusal is raised as an OAuthError; the store's exceptions are translated here.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Protocol

import msgspec
import structlog

from schemas.scopes import Scope
from service.auth.resource.profile import AccessTokenClaims, claims_for
from service.auth.server.errors import OAuthError
from service.auth.server.store import GrantStore, RefreshStore
from service.auth.server.store.errors import (
    CodeReplayed,
    InvalidGrant,
    RateLimited,
    ScopeRevoked,
    StoreError,
)
from service.auth.server.store.records import Grant
from service.auth.server.token_request import CodeExchange, RefreshRequest
from service.wire.b64url import encode_b64url

log = structlog.get_logger("angelos.oauth")


class Signer(Protocol):
    """Signs the claims of an access token (ES256, typ at+jwt) with the active key."""

    def sign_access_token(self, claims: AccessTokenClaims) -> str:
        """Return the compact JWS."""
        ...


class Issuer(msgspec.Struct, frozen=True):
    """Who issues: the issuer URL, the one resource and the owner's subject."""

    issuer: str
    resource: str
    subject: str


class TokenResponse(msgspec.Struct, frozen=True):
    """The 200 answer of /oauth/token (the tokens are secrets: never log this)."""

    access_token: str
    refresh_token: str
    scope: str
    expires_in: int
    token_type: str = "Bearer"

    def __repr__(self) -> str:
        return f"TokenResponse(scope={self.scope!r}, expires_in={self.expires_in})"


def pkce_matches(verifier: str, challenge: str) -> bool:
    """Compare base64url(SHA-256(verifier)) with the stored challenge in constant time."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    expected = encode_b64url(digest).encode("ascii")
    return hmac.compare_digest(expected, challenge.encode("ascii"))


async def exchange_code(
    grants: GrantStore,
    refreshes: RefreshStore,
    signer: Signer,
    who: Issuer,
    request: CodeExchange,
    now: int,
) -> TokenResponse:
    """Redeem an authorization code for an access token and a new refresh family."""
    try:
        read = await grants.read_code(request.code)
        if read is None:
            raise OAuthError(400, "invalid_grant")
        code = read.record
        if (
            code.subject != who.subject
            or code.client_id != request.client_id
            or code.resource != who.resource
            or code.redirect_uri != request.redirect_uri
            or code.expires_unix <= now
            or not pkce_matches(request.code_verifier, code.code_challenge)
        ):
            raise OAuthError(400, "invalid_grant")
        grant = await grants.get(read.grant_id)
        if grant is None or not grant.serves(request.client_id, who.subject, who.resource, now):
            raise OAuthError(400, "invalid_grant")
        budget = await grants.spend_budget(read.grant_id)
        if not budget.allowed:
            raise OAuthError(429, "temporarily_unavailable", budget.retry_after_s)
        if not await grants.consume_code(request.code, read.raw):
            raise OAuthError(400, "invalid_grant")  # another exchange won
        refresh = await refreshes.issue(read.grant_id, request.client_id)
        gid = read.grant_id.reveal()
        response = _response(signer, who, grant, gid, code.scopes, refresh.reveal(), now)
        if not await grants.grant_active(gid, request.client_id, who.subject, code.scopes):
            raise OAuthError(400, "invalid_grant")  # revoked while the token was being made
    except CodeReplayed:
        # The client ID is configuration; the code itself never appears in the log.
        log.warning("authorization_code_replayed", client_id=request.client_id)
        raise OAuthError(400, "invalid_grant") from None
    except InvalidGrant:
        raise OAuthError(400, "invalid_grant") from None
    except StoreError:
        raise OAuthError(503, "temporarily_unavailable") from None
    return response


async def refresh_tokens(
    refreshes: RefreshStore, signer: Signer, who: Issuer, request: RefreshRequest, now: int
) -> TokenResponse:
    """Rotate a refresh token: a new one, and an access token for the grant's (or fewer) scopes."""
    try:
        rotation = await refreshes.rotate(request.refresh_token, request.client_id, request.scopes)
    except RateLimited as limited:
        raise OAuthError(429, "temporarily_unavailable", limited.retry_after_s) from None
    except ScopeRevoked:
        raise OAuthError(400, "invalid_scope") from None
    except InvalidGrant:
        raise OAuthError(400, "invalid_grant") from None
    except StoreError:
        raise OAuthError(503, "temporarily_unavailable") from None
    gid = rotation.grant_id.reveal()
    return _response(
        signer, who, rotation.grant, gid, rotation.scopes, rotation.refresh_token.reveal(), now
    )


def _response(
    signer: Signer,
    who: Issuer,
    grant: Grant,
    gid: str,
    scopes: tuple[Scope, ...],
    refresh_token: str,
    now: int,
) -> TokenResponse:
    claims = claims_for(
        issuer=who.issuer,
        resource=who.resource,
        subject=who.subject,
        gid=gid,
        client_id=grant.client_id,
        scopes=scopes,
        grant_expires=grant.expires_unix,
        now=now,
    )
    token = signer.sign_access_token(claims)
    return TokenResponse(token, refresh_token, claims.scope, claims.exp - now)
