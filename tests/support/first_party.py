"""The first-party authorization server in this process, over TLS on a free loopback port.

    async with first_party(services) as server:
        async with server.http() as owner:        # an aiohttp session with its own cookie jar
            page = await owner.get(server.authorize_url(state="s1"))

`AuthorizationServer(config, signer, store_of, OwnerBrowser(...))` is served by aiohttp with the
test CA's localhost certificate; the issuer is `https://localhost:<port>`. Its configuration comes
from `load_config` (first-party mode, private hosts allowed, a fresh signing key and bootstrap
token, one client whose callback `https://client.example.com/callback` is never dialled), and
its store is an OAuthStore over the test Redis with an owner subject of its own, whose keys are
deleted afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import secrets
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import redis.asyncio as aioredis
from aiohttp import web
from multidict import CIMultiDictProxy

from service.auth.server.bootstrap import bootstrap_token_hash, new_bootstrap_token
from service.auth.server.browser import OwnerBrowser
from service.auth.server.routes import AuthorizationServer, oauth_headers
from service.auth.server.signing import Signer, new_signing_key
from service.auth.server.store import OAuthStore
from service.config import FirstPartyConfig, load_config
from service.transports.serve_http import HttpService, app_runner, http_service
from support.angelos_process import free_port
from support.services import Services

CLIENT_ID = "angelos-test-client"
CLIENT_NAME = "Test Client <&>"  # markup characters prove the pages escape names
CALLBACK = "https://client.example.com/callback"
CALLBACK_ORIGIN = "https://client.example.com"
CSRF_META = re.compile(r'<meta name="angelos-csrf" content="([A-Za-z0-9_-]+)">')


def pkce_pair() -> tuple[str, str]:
    """A fresh PKCE verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def csrf_of(html: str) -> str:
    """The CSRF value a rendered page carries."""
    found = CSRF_META.search(html)
    if found is None:
        raise AssertionError("the page carries no CSRF value")
    return found.group(1)


@dataclass
class Answer:
    """One HTTP answer, read completely."""

    status: int
    headers: CIMultiDictProxy[str]
    text: str

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.text)


@dataclass
class HttpOwner:
    """A browser stand-in over plain aiohttp: one cookie jar, no redirects followed."""

    server: FirstPartyServer
    session: aiohttp.ClientSession

    async def get(self, path: str, **headers: str) -> Answer:
        """GET a path (or absolute URL) of the server."""
        return await self.request("GET", path, headers=headers)

    async def post_form(
        self, path: str, fields: list[tuple[str, str]], *, origin: str | None = "", **headers: str
    ) -> Answer:
        """POST a URL-encoded form with Origin = the issuer unless `origin` says otherwise."""
        headers = {"Content-Type": "application/x-www-form-urlencoded", **headers}
        return await self.request(
            "POST", path, data=urlencode(fields), headers=headers, origin=origin
        )

    async def post_json(
        self, path: str, body: object, csrf: str | None, *, origin: str | None = "", **headers: str
    ) -> Answer:
        """POST JSON with the CSRF header (when given) and Origin as for forms."""
        headers = {"Content-Type": "application/json", **headers}
        if csrf is not None:
            headers["X-CSRF-Token"] = csrf
        data = json.dumps(body)
        return await self.request("POST", path, data=data, headers=headers, origin=origin)

    async def request(
        self,
        method: str,
        path: str,
        *,
        data: str | None = None,
        headers: Mapping[str, str] | None = None,
        origin: str | None = None,
    ) -> Answer:
        """Any request; `origin` "" means the issuer and None means no Origin header."""
        sent = dict(headers or {})
        if origin is not None:
            sent["Origin"] = origin or self.server.issuer
        url = path if path.startswith("https://") else f"{self.server.issuer}{path}"
        async with self.session.request(
            method, url, data=data, headers=sent, allow_redirects=False
        ) as response:
            return Answer(response.status, response.headers, await response.text())

    def cookie(self) -> str | None:
        """The session cookie this jar holds, if any."""
        for cookie in self.session.cookie_jar:
            if cookie.key == "__Host-angelos":
                return cookie.value
        return None


@dataclass
class FirstPartyServer:
    """A running authorization server and what the tests need to talk to it."""

    port: int
    config: FirstPartyConfig
    store: OAuthStore
    bootstrap_token: str
    ssl_context: ssl.SSLContext
    env: dict[str, str] = field(default_factory=dict)
    store_up: bool = True  # False: the server's store source answers None (no store)

    @property
    def issuer(self) -> str:
        """https://localhost:<port>."""
        return f"https://localhost:{self.port}"

    def authorize_url(
        self, *, state: str = "state-1", challenge: str, scope: str = "mail.read mail.send"
    ) -> str:
        """A valid authorization request of the test client."""
        query = urlencode(
            {
                "response_type": "code",
                "client_id": CLIENT_ID,
                "redirect_uri": CALLBACK,
                "scope": scope,
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": self.config.resource,
            }
        )
        return f"{self.issuer}/oauth/authorize?{query}"

    @contextlib.asynccontextmanager
    async def http(self, source: str | None = None) -> AsyncIterator[HttpOwner]:
        """A plain aiohttp client trusting the test CA, with a cookie jar of its own; `source`
        is a loopback address its connections are bound to (127.0.0.2, ...)."""
        local = None if source is None else (source, 0)
        connector = aiohttp.TCPConnector(ssl=self.ssl_context, local_addr=local)
        async with aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.CookieJar()
        ) as session:
            yield HttpOwner(self, session)

    async def exchange_code(self, code: str, verifier: str) -> Answer:
        """Redeem a code at /oauth/token as the client would (form POST, PKCE verifier)."""
        fields = {
            "grant_type": "authorization_code",
            "client_id": CLIENT_ID,
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": CALLBACK,
            "resource": self.config.resource,
        }
        async with self.http() as client:
            return await client.request(
                "POST",
                "/oauth/token",
                data=urlencode(fields),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )


def first_party_env(services: Services, port: int, owner: str, token_hash: str) -> dict[str, str]:
    """The environment of a first-party server on localhost:<port>."""
    issuer = f"https://localhost:{port}"
    pem, kid = new_signing_key()
    client = {"client_id": CLIENT_ID, "client_name": CLIENT_NAME, "redirect_uris": [CALLBACK]}
    return {
        **services.product_env,
        "ANGELOS_OAUTH_ENABLED": "1",
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "1",
        "MCP_OAUTH_ISSUER": issuer,
        "MCP_RESOURCE_URL": f"{issuer}/mcp",
        "MCP_OAUTH_JWKS_URL": f"{issuer}/oauth/jwks.json",
        "MCP_ALLOWED_SUBJECTS": owner,
        "ANGELOS_OAUTH_SIGNING_KEY_PEM": pem,
        "ANGELOS_OAUTH_SIGNING_KEY_ID": kid,
        "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps([client]),
        "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": token_hash,
    }


@contextlib.asynccontextmanager
async def first_party(
    services: Services,
    bootstrap_token: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[FirstPartyServer]:
    """Serve the authorization server with the browser flow until the block ends (with a
    fresh bootstrap token unless one is given, and `extra_env` added to its environment)."""
    port = free_port()
    owner = f"owner-{secrets.token_hex(8)}"
    token, token_hash = new_bootstrap_token()
    if bootstrap_token is not None:
        token, token_hash = bootstrap_token, bootstrap_token_hash(bootstrap_token)
    env = {**first_party_env(services, port, owner, token_hash), **(extra_env or {})}
    loaded = load_config(env)
    config = loaded.first_party
    if config is None:  # first-party mode still reports itself as not served; nothing else may
        raise AssertionError(f"first-party configuration refused: {loaded.first_party_problems}")
    client = aioredis.Redis.from_url(services.redis_url)
    store = OAuthStore(client, config.owner, config.resource)
    running: list[FirstPartyServer] = []

    def store_of() -> OAuthStore | None:
        return store if running and running[0].store_up else None

    signer = Signer.of(config)
    server = AuthorizationServer(config, signer, store_of, OwnerBrowser(config, store_of))
    app = web.Application(middlewares=[oauth_headers])
    server.add_routes(app)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(services.dir / "tls" / "server.crt", services.dir / "tls" / "server.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
        running.append(FirstPartyServer(port, config, store, token, services.ssl_context(), env))
        yield running[0]
    finally:
        await runner.cleanup()
        keys = [key async for key in client.scan_iter(match=f"{store.core.keys.prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@contextlib.asynccontextmanager
async def served_http(
    services: Services, port: int, owner: str, env: Mapping[str, str], *prefixes: str
) -> AsyncIterator[tuple[HttpService, OAuthStore]]:
    """Serve the whole HTTP service over TLS on localhost:<port> with `env`; afterwards delete
    the owner's OAuth keys and every key under `prefixes`."""
    config = load_config(env)
    assert config.problems == (), config.problems
    service = http_service(config, "127.0.0.1", port, None)
    assert service.app is not None
    await service.app.start()
    runner = app_runner(service.web_app)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(services.dir / "tls" / "server.crt", services.dir / "tls" / "server.key")
    client = aioredis.Redis.from_url(services.redis_url)
    store = OAuthStore(client, owner, f"https://localhost:{port}/mcp")
    try:
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
        yield service, store
    finally:
        await runner.cleanup()
        await service.aclose()
        for prefix in (store.core.keys.prefix, *prefixes):
            keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
            if keys:
                await client.delete(*keys)
        await client.aclose()
