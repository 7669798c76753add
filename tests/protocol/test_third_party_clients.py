"""Real third-party MCP clients against `angelos serve --transport http` behind the test TLS
proxy: the TypeScript SDK client with its defaults, the MCP Inspector CLI and fastmcp's OAuth
helper, each a subprocess (tests/support/third_party.py) running every step itself: discover,
register (or a configured client ID), authorize, token, `tools/list`, a `mail_query` call,
refresh, and a call with the refreshed token.

External-issuer mode: the issuer is the oidc-provider peer, whose development login the test
walks without a browser; the user's browser is then sent to the client's loopback callback by
an HTTP GET. First-party mode: angelos is the authorization server, and the owner enrols a
passkey, signs in and approves in headless Chromium, which follows the redirect to the client's
own loopback listener. There each client runs twice: with a configured native client ID
(RFC 8252 loopback callbacks, any port), and with its defaults, registering itself (RFC 7591);
the registering runs skip while the AS metadata advertises no `registration_endpoint`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from service.auth.server.bootstrap import new_bootstrap_token
from support.angelos_process import free_port, http_server
from support.browser import browser
from support.first_party import first_party_env
from support.oidc import authorize_without_browser, peer_from_env
from support.page import Page
from support.services import Services
from support.third_party import (
    Step,
    by_step,
    client_env,
    fastmcp_command,
    inspector_steps,
    missing_installs,
    on_a_free_port,
    run_json_steps,
    ts_client_command,
)
from support.tls_proxy import tls_proxy

pytestmark = pytest.mark.services
SUBJECT = "owner-a"
TOOLS = [
    "mail_create",
    "mail_delete_permanently",
    "mail_modify",
    "mail_prepare",
    "mail_query",
    "mail_send_confirmed",
]


@pytest.fixture(autouse=True)
def installed() -> None:
    missing = missing_installs()
    if missing:
        pytest.skip(f"run scripts/bootstrap first: missing {', '.join(missing)}")


@dataclass
class Remote:
    public_port: int
    backend_port: int
    tls_dir: Path
    ca_file: Path

    @property
    def url(self) -> str:
        return f"https://localhost:{self.public_port}/mcp"

    def proxy(self) -> Any:
        return tls_proxy(self.public_port, self.backend_port, self.tls_dir)


@pytest.fixture(scope="module")
def external(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    peer = peer_from_env()
    public_port = free_port()
    env = {
        **services.product_env,
        "ANGELOS_DATA_DIR": str(tmp_path_factory.mktemp("third-party")),
        "MCP_RESOURCE_URL": f"https://localhost:{public_port}/mcp",
        "MCP_OAUTH_ISSUER": peer.issuer,
        "MCP_OAUTH_JWKS_URL": peer.jwks_url,
        "MCP_ALLOWED_SUBJECTS": SUBJECT,
        "MCP_OAUTH_CA_FILE": str(services.ca_file),
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "1",
    }
    with http_server(env, host="127.0.0.1") as base:
        backend_port = urllib.parse.urlsplit(base).port
        assert backend_port is not None
        yield Remote(public_port, backend_port, services.dir / "tls", services.ca_file)


async def follow_redirect(url: str) -> None:
    """What the user's browser does with the final redirect: GET the client's loopback URL."""
    parts = urllib.parse.urlsplit(url)
    assert parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost"), url
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(timeout=timeout, trust_env=False) as http,
        http.get(url, allow_redirects=False) as answer,
    ):
        assert answer.status == 200, (answer.status, await answer.text())


def external_consent(seen: list[str], redirects: list[str]) -> Any:
    """The user at the external issuer: its login and consent pages walked without a browser,
    then the browser's last hop, a GET of the client's loopback callback."""

    async def consent(authorization_url: str) -> None:
        seen.append(authorization_url)
        final = await authorize_without_browser(authorization_url, SUBJECT, peer=peer_from_env())
        redirects.append(final)
        await follow_redirect(final)

    return consent


def assert_every_step(
    steps: list[Step],
    code: int,
    stderr: str,
    redirects: list[str],
    *,
    registered: bool,
    callback_reported: bool = False,
) -> None:
    """Each step the driver reports passed, once each (a single sign-in), and the one redirect
    to its callback carried a code and the issuer."""
    names = [s["step"] for s in steps]
    assert code == 0 and "error" not in names, (steps, stderr)
    expected = ["discover", "register" if registered else "client", "authorize"]
    expected += ["token", "tools/list", "tools/call", "refresh", "after-refresh", "done"]
    expected += ["callback"] if callback_reported else []
    assert sorted(expected) == sorted(names), names
    step = by_step(steps)
    if callback_reported:
        assert step["callback"]["has_code"] is True and step["callback"]["error"] is None
    [redirect] = redirects
    query = authorization_query(redirect)
    assert "error" not in query and len(query["code"]) == 1 and len(query["iss"]) == 1, query
    refresh = step["refresh"]
    assert refresh.get("refreshed", True) is True and refresh.get("sign_ins", 0) == 0, refresh
    assert TOOLS == step["tools/list"]["names"]
    for call in ("tools/call", "after-refresh"):
        assert step[call]["is_error"] is False, step[call]
        assert step[call]["structured"] is not None, step[call]
    assert step["token"]["has_refresh_token"] is True


def authorization_query(url: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)


@contextlib.asynccontextmanager
async def served(remote: Remote) -> AsyncIterator[None]:
    async with remote.proxy():
        yield


async def test_ts_sdk_client_external_issuer(external: Remote, tmp_path: Path) -> None:
    seen: list[str] = []
    redirects: list[str] = []
    async with served(external):
        port, (steps, code, stderr) = await on_a_free_port(
            lambda port: run_json_steps(
                ts_client_command(external.url, f"http://127.0.0.1:{port}/callback"),
                client_env(external.ca_file, tmp_path),
                external_consent(seen, redirects),
            )
        )
    callback = f"http://127.0.0.1:{port}/callback"
    assert_every_step(steps, code, stderr, redirects, registered=True, callback_reported=True)
    peer = peer_from_env()
    assert by_step(steps)["discover"]["authorization_server"].rstrip("/") == peer.issuer
    [url] = seen
    query = authorization_query(url)
    assert ([external.url], ["S256"], [callback]) == (
        query["resource"],
        query["code_challenge_method"],
        query["redirect_uri"],
    )
    assert "state" not in query  # the SDK's default: the app supplies none


INSPECTOR_ENV = {"MCP_INSPECTOR_SECRET_STORE": "file", "MCP_AUTO_OPEN_ENABLED": "false"}
TOOL_ARGS = '{"action":"capabilities"}'


async def test_inspector_cli_external_issuer(external: Remote, tmp_path: Path) -> None:
    seen: list[str] = []
    redirects: list[str] = []
    env = client_env(external.ca_file, tmp_path, INSPECTOR_ENV)
    async with served(external):
        port, (steps, stderr) = await on_a_free_port(
            lambda port: inspector_steps(
                external.url, f"http://127.0.0.1:{port}/oauth/callback", env,
                external_consent(seen, redirects), TOOL_ARGS,
            )
        )  # fmt: skip
    callback = f"http://127.0.0.1:{port}/oauth/callback"
    assert_every_step(steps, 0, stderr, redirects, registered=True)
    assert 0 == by_step(steps)["tools/call"]["sign_ins"]
    [url] = seen
    query = authorization_query(url)
    assert ([external.url], ["S256"], [callback]) == (
        query["resource"],
        query["code_challenge_method"],
        query["redirect_uri"],
    )


async def test_fastmcp_oauth_helper_external_issuer(external: Remote, tmp_path: Path) -> None:
    seen: list[str] = []
    redirects: list[str] = []
    async with served(external):
        steps, code, stderr = await run_json_steps(
            fastmcp_command(external.url),
            client_env(external.ca_file, tmp_path),
            external_consent(seen, redirects),
        )
    assert_every_step(steps, code, stderr, redirects, registered=True)
    [url] = seen
    query = authorization_query(url)
    assert ([external.url], ["S256"]) == (query["resource"], query["code_challenge_method"])
    callback = urllib.parse.urlsplit(query["redirect_uri"][0])
    assert ("http", "localhost", "/callback") == (callback.scheme, callback.hostname, callback.path)


# --- first-party mode --------------------------------------------------------------------------
NATIVE_ID = "angelos-native-tests"
# RFC 8252 §7.3: any port at request time, the path matched exactly. Each client's own default
# path: the TypeScript driver's /callback, the Inspector's /oauth/callback, fastmcp's
# http://localhost:<port>/callback.
NATIVE_CALLBACKS = [
    "http://127.0.0.1/callback",
    "http://127.0.0.1/oauth/callback",
    "http://localhost/callback",
]


@dataclass
class FirstParty(Remote):
    bootstrap_token: str = ""

    @property
    def issuer(self) -> str:
        return f"https://localhost:{self.public_port}"


@pytest.fixture
def first_party(services: Services, tmp_path: Path) -> Iterator[FirstParty]:
    """A fresh first-party server per test (each browser's authenticator enrols its own owner),
    with one configured native client and registration switched on (used once it is served)."""
    public_port = free_port()
    token, token_hash = new_bootstrap_token()
    native = {
        "client_id": NATIVE_ID,
        "client_name": "Native test clients",
        "redirect_uris": NATIVE_CALLBACKS,
        "native": True,
    }
    env = {
        **first_party_env(services, public_port, f"owner-{secrets.token_hex(6)}", token_hash),
        "ANGELOS_DATA_DIR": str(tmp_path / "data"),
        "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps([native]),
        "ANGELOS_OAUTH_REGISTRATION_ENABLED": "1",
    }
    with http_server(env) as base:
        backend_port = urllib.parse.urlsplit(base).port
        assert backend_port is not None
        yield FirstParty(public_port, backend_port, services.dir / "tls", services.ca_file, token)


@dataclass
class PasskeyOwner:
    """The owner in headless Chromium: enrols (first time), signs in with the passkey and
    approves; Chromium then follows the redirect to the client's own loopback listener."""

    page: Page
    deployment: FirstParty
    seen: list[str]
    redirects: list[str]

    async def consent(self, authorization_url: str) -> None:
        self.seen.append(authorization_url)
        await self.page.goto(authorization_url)
        enrolled = await self.page.evaluate("!document.getElementById('bootstrap-token')")
        if not enrolled:
            await self.page.fill("#bootstrap-token", self.deployment.bootstrap_token)
            async with self.page.navigation():
                await self.page.click("#enrol-button")
        await self.page.wait_for(
            "!!(document.getElementById('sign-in-button') || document.getElementById('approve'))"
        )
        if await self.page.evaluate("!!document.getElementById('sign-in-button')"):
            async with self.page.navigation():
                await self.page.click("#sign-in-button")
        await self.page.wait_for("!!document.getElementById('approve')")
        async with self.page.navigation():
            await self.page.click("#approve")
        self.redirects.append(await self.page.current_url())


@contextlib.asynccontextmanager
async def owner_in_chromium(deployment: FirstParty) -> AsyncIterator[PasskeyOwner]:
    async with (
        deployment.proxy(),
        browser(trust=deployment.tls_dir / "server.crt") as chromium,
    ):
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        yield PasskeyOwner(page, deployment, [], [])


async def registration_endpoint(deployment: FirstParty) -> str | None:
    """The registration endpoint the server's AS metadata advertises, if any."""
    url = f"{deployment.issuer}/.well-known/oauth-authorization-server"
    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=deployment.ca_file))
    async with (
        deployment.proxy(),
        aiohttp.ClientSession(connector=connector, trust_env=False) as http,
        http.get(url) as answer,
    ):
        assert answer.status == 200, await answer.text()
        metadata = await answer.json()
    endpoint = metadata.get("registration_endpoint")
    return endpoint if isinstance(endpoint, str) else None


def assert_first_party_authorization(owner: PasskeyOwner, deployment: FirstParty) -> None:
    [url] = owner.seen
    query = authorization_query(url)
    assert ([deployment.url], ["S256"]) == (query["resource"], query["code_challenge_method"])
    [redirect] = owner.redirects
    assert [deployment.issuer] == authorization_query(redirect)["iss"]


async def test_ts_sdk_client_first_party_native(first_party: FirstParty, tmp_path: Path) -> None:
    async with owner_in_chromium(first_party) as owner:
        _, (steps, code, stderr) = await on_a_free_port(
            lambda port: run_json_steps(
                ts_client_command(
                    first_party.url, f"http://127.0.0.1:{port}/callback", client_id=NATIVE_ID
                ),
                client_env(first_party.ca_file, tmp_path),
                owner.consent,
            )
        )
    assert_every_step(
        steps, code, stderr, owner.redirects, registered=False, callback_reported=True
    )
    assert_first_party_authorization(owner, first_party)
    assert "state" not in authorization_query(owner.seen[0])  # the SDK's default


async def test_inspector_cli_first_party_native(first_party: FirstParty, tmp_path: Path) -> None:
    env = client_env(first_party.ca_file, tmp_path, INSPECTOR_ENV)
    async with owner_in_chromium(first_party) as owner:
        _, (steps, stderr) = await on_a_free_port(
            lambda port: inspector_steps(
                first_party.url, f"http://127.0.0.1:{port}/oauth/callback", env,
                owner.consent, TOOL_ARGS, "--client-id", NATIVE_ID,
            )
        )  # fmt: skip
    assert_every_step(steps, 0, stderr, owner.redirects, registered=False)
    assert_first_party_authorization(owner, first_party)


async def test_fastmcp_oauth_helper_first_party_native(
    first_party: FirstParty, tmp_path: Path
) -> None:
    async with owner_in_chromium(first_party) as owner:
        steps, code, stderr = await run_json_steps(
            fastmcp_command(first_party.url, client_id=NATIVE_ID),
            client_env(first_party.ca_file, tmp_path),
            owner.consent,
        )
    assert_every_step(steps, code, stderr, owner.redirects, registered=False)
    assert_first_party_authorization(owner, first_party)


@pytest.mark.parametrize("client", ["ts-sdk", "inspector", "fastmcp"])
async def test_registering_clients_first_party(
    first_party: FirstParty, tmp_path: Path, client: str
) -> None:
    """Each client with its defaults: no client ID, so it registers (RFC 7591) at the endpoint
    the AS metadata advertises; skipped while the server advertises none."""
    if await registration_endpoint(first_party) is None:
        pytest.skip("the first-party AS metadata advertises no registration_endpoint")
    async with owner_in_chromium(first_party) as owner:
        if client == "inspector":
            env = client_env(first_party.ca_file, tmp_path, INSPECTOR_ENV)
            _, (steps, stderr) = await on_a_free_port(
                lambda port: inspector_steps(
                    first_party.url, f"http://127.0.0.1:{port}/oauth/callback", env,
                    owner.consent, TOOL_ARGS,
                )
            )  # fmt: skip
            code = 0
        elif client == "ts-sdk":
            _, (steps, code, stderr) = await on_a_free_port(
                lambda port: run_json_steps(
                    ts_client_command(first_party.url, f"http://127.0.0.1:{port}/callback"),
                    client_env(first_party.ca_file, tmp_path),
                    owner.consent,
                )
            )
        else:
            steps, code, stderr = await run_json_steps(
                fastmcp_command(first_party.url),
                client_env(first_party.ca_file, tmp_path),
                owner.consent,
            )
    assert_every_step(
        steps, code, stderr, owner.redirects, registered=True, callback_reported=client == "ts-sdk"
    )
    assert_first_party_authorization(owner, first_party)
