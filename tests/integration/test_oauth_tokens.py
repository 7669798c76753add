"""/oauth/token's two grants against the real store, checked by the resource server's verifier.

Access tokens are signed by a test key in place of the configured one; everything else (the
store's Lua, the grant check the resource server runs on every call) is the product's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

import msgspec
import pytest
import structlog

from service.auth.resource.jwt import TokenRules
from service.auth.resource.key_cache import KeyCache, LocalKeySource
from service.auth.resource.profile import AccessTokenClaims
from service.auth.resource.verifier import AuthFailure, TokenVerifier
from service.auth.server.errors import OAuthError as TokenRefused
from service.auth.server.store import OAuthStore, StoreLimits
from service.auth.server.token_request import CodeExchange, RefreshRequest
from service.auth.server.token_service import (
    Issuer,
    TokenResponse,
    exchange_code,
    refresh_tokens,
)
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    backend_fixture,  # noqa: F401
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
)
from support.oauth_store import (
    CLIENT,
    REDIRECT,
    RESOURCE,
    owner_fixture,  # noqa: F401
    store_fixture,  # noqa: F401
    twin,
)
from support.tokens import Minter, ec_key

pytestmark = pytest.mark.services
ISSUER = "https://mail.example.com"
VERIFIER = "v" * 43
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=")


class ServerSigner:
    """Signs as the authorization server does (ES256, at+jwt), with a test key."""

    def __init__(self, subject: str) -> None:
        self.minter = Minter(issuer=ISSUER, resource=RESOURCE, subject=subject, keys=(ec_key(),))

    def sign_access_token(self, claims: AccessTokenClaims) -> str:
        key = self.minter.ec
        header = {"alg": "ES256", "kid": key.kid, "typ": "at+jwt"}
        return self.minter.raw(header, msgspec.structs.asdict(claims), key)

    def verifier(self, store: OAuthStore) -> TokenVerifier:
        rules = TokenRules(ISSUER, RESOURCE, frozenset({self.minter.subject}))
        keys = KeyCache(LocalKeySource(self.minter.jwks()))
        return TokenVerifier(rules, keys, grant_check=store.grants.grant_active)


async def granted_code(store: OAuthStore, scopes: tuple[str, ...]) -> str:
    gid, grant = await store.grants.create(CLIENT, "Claude", scopes)
    code = await store.grants.put_code(
        gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE.decode()
    )
    return code.reveal()


def who(store: OAuthStore) -> Issuer:
    return Issuer(ISSUER, RESOURCE, store.core.owner_subject)


async def exchange(store: OAuthStore, code: str, verifier: str = VERIFIER) -> Any:
    signer = ServerSigner(store.core.owner_subject)
    request = CodeExchange(CLIENT, code, verifier, REDIRECT)
    now = int(time.time())
    try:  # the response, or the refusal raised
        return await exchange_code(store.grants, store.refresh, signer, who(store), request, now)
    except TokenRefused as refused:
        return refused


async def refresh(store: OAuthStore, token: str, scopes: tuple[str, ...] | None = None) -> Any:
    signer = ServerSigner(store.core.owner_subject)
    request = RefreshRequest(CLIENT, token, scopes)
    try:  # the response, or the refusal raised
        return await refresh_tokens(store.refresh, signer, who(store), request, int(time.time()))
    except TokenRefused as refused:
        return refused


def claims_of(token: str) -> dict[str, Any]:
    header, payload, _ = token.split(".")
    pad = lambda part: part + "=" * (-len(part) % 4)  # noqa: E731
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(pad(payload)))
    decoded["_header"] = json.loads(base64.urlsafe_b64decode(pad(header)))
    return decoded


async def test_a_code_gives_a_short_single_audience_token_the_resource_server_accepts(
    store: OAuthStore,
) -> None:
    answer = await exchange(store, await granted_code(store, ("mail.read", "mail.send")))
    assert isinstance(answer, TokenResponse)
    claims = claims_of(answer.access_token)
    assert {"alg": "ES256", "kid": "key-2", "typ": "at+jwt"} == claims["_header"]
    assert (RESOURCE, "access", CLIENT) == (claims["aud"], claims["token_use"], claims["client_id"])
    assert claims["exp"] - claims["iat"] <= 300 and answer.expires_in <= 300
    assert {"jti", "gid"} <= set(claims) and "mail.read mail.send" == answer.scope
    principal = (
        await ServerSigner(store.core.owner_subject).verifier(store).principal(answer.access_token)
    )
    assert frozenset({"mail.read", "mail.send"}) == principal.scopes


async def test_a_wrong_verifier_leaves_the_code_redeemable_once(store: OAuthStore) -> None:
    code = await granted_code(store, ("mail.read",))
    wrong = await exchange(store, code, verifier="w" * 43)
    right = await exchange(store, code)
    again = await exchange(store, code)
    assert TokenRefused(400, "invalid_grant") == wrong
    assert isinstance(right, TokenResponse)
    assert TokenRefused(400, "invalid_grant") == again


async def test_a_replayed_code_revokes_the_tokens_of_its_first_redemption(
    store: OAuthStore,
) -> None:
    code = await granted_code(store, ("mail.read",))
    first = await exchange(store, code)
    assert isinstance(first, TokenResponse)
    verifier = ServerSigner(store.core.owner_subject).verifier(store)
    await verifier.principal(first.access_token)

    with structlog.testing.capture_logs() as logs:
        replayed = await exchange(store, code)

    assert TokenRefused(400, "invalid_grant") == replayed
    with pytest.raises(AuthFailure) as refused:
        await verifier.principal(first.access_token)
    assert (401, "grant") == (refused.value.status, refused.value.rule)
    assert TokenRefused(400, "invalid_grant") == await refresh(store, first.refresh_token)
    assert [] == await store.grants.list_active()
    assert [
        {"event": "authorization_code_replayed", "client_id": CLIENT, "log_level": "warning"}
    ] == logs
    assert code not in str(logs)


async def test_a_rate_limited_exchange_keeps_the_code_redeemable(store: OAuthStore) -> None:
    gid, grant = await store.grants.create(CLIENT, "Claude", ("mail.read",))
    first, second = [
        (
            await store.grants.put_code(
                gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE.decode()
            )
        ).reveal()
        for _ in range(2)
    ]
    tight = twin(store, limits=StoreLimits(grant_budget=1))
    assert isinstance(await exchange(tight, first), TokenResponse)
    limited = await exchange(tight, second)
    assert (429, "temporarily_unavailable") == (limited.status, limited.error)
    assert 0 < limited.retry_after_s <= 60
    assert isinstance(await exchange(store, second), TokenResponse)  # the budget's 120/min


async def test_refresh_rotates_and_reuse_revokes_the_grant(store: OAuthStore) -> None:
    answer = await exchange(store, await granted_code(store, ("mail.read", "mail.send")))
    rotated = await refresh(store, answer.refresh_token)
    assert isinstance(rotated, TokenResponse)
    assert rotated.refresh_token != answer.refresh_token
    verifier = ServerSigner(store.core.owner_subject).verifier(store)
    await verifier.principal(rotated.access_token)
    reused = await refresh(store, answer.refresh_token)
    assert TokenRefused(400, "invalid_grant") == reused
    with pytest.raises(AuthFailure) as refused:
        await verifier.principal(rotated.access_token)
    assert (401, "grant") == (refused.value.status, refused.value.rule)
    assert TokenRefused(400, "invalid_grant") == await refresh(store, rotated.refresh_token)


async def test_refresh_may_narrow_but_widening_revokes(store: OAuthStore) -> None:
    answer = await exchange(store, await granted_code(store, ("mail.read", "mail.send")))
    narrow = await refresh(store, answer.refresh_token, ("mail.read",))
    assert isinstance(narrow, TokenResponse) and "mail.read" == narrow.scope
    wide = await refresh(store, narrow.refresh_token, ("mail.read", "mail.write"))
    assert TokenRefused(400, "invalid_scope") == wide
    assert [] == await store.grants.list_active()


async def test_a_revoked_grant_stops_its_unexpired_token_on_the_next_call(
    store: OAuthStore,
) -> None:
    answer = await exchange(store, await granted_code(store, ("mail.read",)))
    verifier = ServerSigner(store.core.owner_subject).verifier(store)
    await verifier.principal(answer.access_token)
    [entry] = await store.grants.list_active()
    assert await store.grants.revoke(entry.handle)
    with pytest.raises(AuthFailure) as refused:
        await verifier.principal(answer.access_token)
    assert (401, "grant") == (refused.value.status, refused.value.rule)
