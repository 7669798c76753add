"""First-party mode end to end: `angelos serve --transport http` behind a TLS proxy, the mcp
SDK's own OAuth client, and the owner's passkey sign-in and consent in headless Chromium.

The SDK client is the Claude-like client: it POSTs to /mcp, gets the 401, reads the resource
and authorization-server metadata, and sends the "user" to the authorization URL; there the
browser enrols the owner's first passkey with the bootstrap token (first time), signs in,
approves, and the callback the browser is sent to hands code, state and iss back to the SDK,
which redeems the code with PKCE and calls tools with the token.
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import AuthorizationCodeResult
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from service.auth.server.bootstrap import new_bootstrap_token
from support.angelos_process import free_port, http_server
from support.browser import browser
from support.first_party import CALLBACK, CLIENT_ID, first_party_env
from support.oidc import MemoryTokenStorage
from support.page import Page
from support.services import Services
from support.tls_proxy import tls_proxy

pytestmark = pytest.mark.services
ERAS = ["legacy", "2026-07-28"]


@dataclass
class Deployment:
    public_port: int
    backend_port: int
    tls_dir: Path
    bootstrap_token: str

    @property
    def url(self) -> str:
        return f"https://localhost:{self.public_port}/mcp"

    @property
    def issuer(self) -> str:
        return f"https://localhost:{self.public_port}"


@pytest.fixture
def deployment(services: Services, tmp_path: Path) -> Iterator[Deployment]:
    """A fresh server per test: each browser's virtual authenticator enrols its own owner."""
    public_port = free_port()
    token, token_hash = new_bootstrap_token()
    env = {
        **first_party_env(services, public_port, f"owner-{secrets.token_hex(6)}", token_hash),
        "ANGELOS_DATA_DIR": str(tmp_path),
    }
    with http_server(env) as base:
        backend_port = urllib.parse.urlsplit(base).port
        assert backend_port is not None
        yield Deployment(public_port, backend_port, services.dir / "tls", token)


@dataclass
class Owner:
    """The SDK's redirect and callback handlers, played by the owner in Chromium."""

    page: Page
    deployment: Deployment
    authorization_urls: list[str] = field(default_factory=list)
    callbacks: list[str] = field(default_factory=list)

    async def redirect(self, authorization_url: str) -> None:
        self.authorization_urls.append(authorization_url)
        await self.page.goto(authorization_url)
        enrolled = await self.page.evaluate("!document.getElementById('bootstrap-token')")
        if not enrolled:
            await self.page.fill("#bootstrap-token", self.deployment.bootstrap_token)
            async with self.page.navigation():
                await self.page.click("#enrol-button")
        await self.page.wait_for("!!document.getElementById('sign-in-button')")
        async with self.page.navigation():
            await self.page.click("#sign-in-button")
        await self.page.wait_for("!!document.getElementById('approve')")
        seen = await self.page.answer_locally(f"{CALLBACK}?*", "<p>client callback</p>")
        async with self.page.navigation():
            await self.page.click("#approve")
        self.callbacks.extend(seen)

    async def callback(self) -> AuthorizationCodeResult:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.callbacks[-1]).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query["iss"][0]
        )


def provider(deployment: Deployment, owner: Owner) -> OAuthClientProvider:
    storage = MemoryTokenStorage()
    # A predefined client (the connector dialog's pasted client ID): nothing is registered.
    storage.client_info = OAuthClientInformationFull(
        client_id=CLIENT_ID,
        redirect_uris=[AnyUrl(CALLBACK)],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl(CALLBACK)],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(
        server_url=deployment.url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=owner.redirect,
        callback_handler=owner.callback,
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_the_sdk_client_reaches_tools_through_passkey_sign_in_and_consent(
    deployment: Deployment, services: Services, mode: str
) -> None:
    tls = deployment.tls_dir
    async with (
        tls_proxy(deployment.public_port, deployment.backend_port, tls),
        browser(trust=tls / "server.crt") as chromium,
    ):
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        owner = Owner(page, deployment)
        auth = provider(deployment, owner)
        async with httpx2.AsyncClient(
            auth=auth, verify=services.ssl_context(), trust_env=False, timeout=60
        ) as http:
            client = Client(streamable_http_client(deployment.url, http_client=http), mode=mode)
            async with client:
                tools = await client.list_tools()
                result = await client.call_tool("mail_query", {"action": "folders"})
    assert 6 == len(tools.tools)
    assert result.is_error is False and result.structured_content is not None
    [authorization_url] = owner.authorization_urls
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)
    assert ([deployment.url], ["S256"], [CLIENT_ID]) == (
        query["resource"],
        query["code_challenge_method"],
        query["client_id"],
    )
    [callback] = owner.callbacks
    assert [deployment.issuer] == urllib.parse.parse_qs(urllib.parse.urlsplit(callback).query)[
        "iss"
    ]
