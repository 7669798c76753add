"""The mcp SDK's own OAuth client (OAuthClientProvider) gets real tokens from the OAuth test peer.

This half of the flow is tested apart from angelos (test_oauth_e2e.py runs the whole): a
stand-in protected resource, a small aiohttp HTTPS app on loopback, publishes its protected
resource metadata, answers 401 with a `resource_metadata` challenge, and records the bearer
tokens it is sent, so the tests can look at what the client asked for and what it got (refresh
without a new sign-in included). Everything between the SDK client and the issuer is real.
"""

from __future__ import annotations

import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import jwt
import pytest
from aiohttp import web

from support.oidc import (
    REDIRECT_URI,
    BrowserlessUser,
    MemoryTokenStorage,
    OidcPeer,
    peer_from_env,
    sdk_http_client,
    sdk_oauth_provider,
)
from support.services import Services

pytestmark = pytest.mark.services

SCOPES = ["mail.read", "mail.write", "mail.send"]


@dataclass
class StandIn:
    """The stand-in protected resource: its /mcp URL and the bearer tokens it was sent."""

    url: str = ""
    tokens: list[str] = field(default_factory=list)


@pytest.fixture
def peer(services: Services) -> OidcPeer:
    """The issuer of this run (`services` skips outside scripts/test-services)."""
    return peer_from_env()


@pytest.fixture
async def resource(services: Services, peer: OidcPeer) -> AsyncIterator[StandIn]:
    stand_in = StandIn()

    async def metadata(_: web.Request) -> web.Response:
        return web.json_response(
            {
                "resource": stand_in.url,
                "authorization_servers": [peer.issuer],
                "scopes_supported": SCOPES,
                "bearer_methods_supported": ["header"],
            }
        )

    async def mcp(request: web.Request) -> web.Response:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme != "Bearer" or not token:
            origin = stand_in.url.removesuffix("/mcp")
            challenge = (
                f'Bearer resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"'
            )
            return web.Response(status=401, headers={"WWW-Authenticate": challenge})
        stand_in.tokens.append(token)
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/.well-known/oauth-protected-resource/mcp", metadata)
    app.router.add_post("/mcp", mcp)
    runner = web.AppRunner(app)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(services.dir / "tls" / "server.crt", services.dir / "tls" / "server.key")
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    stand_in.url = f"https://127.0.0.1:{runner.addresses[0][1]}/mcp"
    try:
        yield stand_in
    finally:
        await runner.cleanup()


async def claims_of(peer: OidcPeer, token: str, audience: str) -> dict[str, object]:
    async with sdk_http_client(peer=peer) as http:
        keys = jwt.PyJWKSet.from_dict((await http.get(peer.jwks_url)).json())
    key = next(k for k in keys.keys if k.key_id == jwt.get_unverified_header(token)["kid"])
    claims: dict[str, object] = jwt.decode(
        token, key=key, algorithms=["ES256"], audience=audience, issuer=peer.issuer
    )
    return claims


async def test_the_sdk_client_signs_in_and_retries_with_a_token_for_the_resource(
    peer: OidcPeer, resource: StandIn
) -> None:
    provider = sdk_oauth_provider(resource.url, "alice", peer=peer)
    async with sdk_http_client(provider, peer=peer) as http:
        response = await http.post(resource.url, json={})
    assert 200 == response.status_code
    [token] = resource.tokens
    claims = await claims_of(peer, token, resource.url)
    expected = ("alice", resource.url, peer.issuer, " ".join(SCOPES))
    assert expected == (claims["sub"], claims["aud"], claims["iss"], claims["scope"])


async def test_the_sdk_client_asks_with_pkce_s256_and_the_resource(
    peer: OidcPeer, resource: StandIn
) -> None:
    user = BrowserlessUser("alice", peer)
    provider = sdk_oauth_provider(resource.url, "alice", peer=peer, user=user)
    async with sdk_http_client(provider, peer=peer) as http:
        await http.post(resource.url, json={})
    [url] = user.authorization_urls
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    # The SDK adds offline_access (and so prompt=consent) because the issuer advertises it.
    expected = (
        "S256",
        resource.url,
        REDIRECT_URI,
        " ".join([*SCOPES, "offline_access"]),
        "consent",
    )
    actual = (
        query["code_challenge_method"],
        query["resource"],
        query["redirect_uri"],
        query["scope"],
        query["prompt"],
    )
    assert expected == actual


async def test_the_sdk_client_registers_as_a_public_client(
    peer: OidcPeer, resource: StandIn
) -> None:
    storage = MemoryTokenStorage()
    provider = sdk_oauth_provider(resource.url, "alice", peer=peer, storage=storage)
    async with sdk_http_client(provider, peer=peer) as http:
        await http.post(resource.url, json={})
    assert storage.client_info is not None
    expected = ("none", None, peer.issuer)
    actual = (
        storage.client_info.token_endpoint_auth_method,
        storage.client_info.client_secret,
        storage.client_info.issuer,
    )
    assert expected == actual


async def test_the_sdk_client_refreshes_an_expired_token_without_a_new_sign_in(
    peer: OidcPeer, resource: StandIn
) -> None:
    user = BrowserlessUser("alice", peer)
    provider = sdk_oauth_provider(resource.url, "alice", peer=peer, user=user)
    async with sdk_http_client(provider, peer=peer) as http:
        await http.post(resource.url, json={})
        # The SDK refreshes before a request once its recorded expiry has passed.
        provider.context.token_expiry_time = time.time() - 1
        await http.post(resource.url, json={})
    first, second = resource.tokens
    old = await claims_of(peer, first, resource.url)
    new = await claims_of(peer, second, resource.url)
    assert 1 == len(user.authorization_urls)
    assert (old["sub"], old["client_id"]) == (new["sub"], new["client_id"])
    assert old["jti"] != new["jti"]
