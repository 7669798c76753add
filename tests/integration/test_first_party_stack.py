"""First-party mode through the whole HTTP service: the canonical host gate, the authorization
server's machine endpoints, and /mcp trusting only the tokens it issued, each checked online.

The service is angelos's own (http_service, first-party configuration from load_config), over
TLS on loopback with the test CA's localhost certificate. Grants and codes are made in the
store directly where the owner's browser would have made them (the browser side has its own
tests); everything after that crosses the wire.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
from aiohttp import web

from service.auth.server.bootstrap import new_bootstrap_token
from service.auth.server.store import OAuthStore
from service.config import load_config
from service.transports.serve_http import app_runner, http_service
from support.angelos_process import free_port
from support.first_party import CALLBACK, CLIENT_ID, first_party_env, served_http
from support.services import Services

pytestmark = pytest.mark.services
VERIFIER = "v" * 43
CHALLENGE = (
    base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
)
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@dataclass
class Stack:
    port: int
    store: OAuthStore
    env: dict[str, str]
    ssl: ssl.SSLContext

    @property
    def issuer(self) -> str:
        return f"https://localhost:{self.port}"

    async def request(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, data: Any = None
    ) -> tuple[int, dict[str, str], bytes]:
        connector = aiohttp.TCPConnector(ssl=self.ssl)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.request(
                method, f"{self.issuer}{path}", headers=headers, data=data, allow_redirects=False
            ) as r,
        ):
            return r.status, dict(r.headers), await r.read()

    async def token(self, **fields: str) -> tuple[int, dict[str, Any]]:
        form = {"client_id": CLIENT_ID, "resource": f"{self.issuer}/mcp", **fields}
        status, _, body = await self.request(
            "POST",
            "/oauth/token",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            data=urlencode(form),
        )
        return status, json.loads(body)

    async def mcp(self, token: str) -> int:
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        status, _, _ = await self.request(
            "POST", "/mcp", headers=headers, data=json.dumps(LIST_TOOLS)
        )
        return status


@contextlib.asynccontextmanager
async def stack(services: Services, port: int | None = None, **extra: str) -> AsyncIterator[Stack]:
    port = port or free_port()
    owner = "owner-stack"
    _, token_hash = new_bootstrap_token()
    env = {**first_party_env(services, port, owner, token_hash), **extra}
    async with served_http(services, port, owner, env) as (_, store):
        yield Stack(port, store, env, services.ssl_context())


async def issued(s: Stack, scopes: tuple[str, ...] = ("mail.read",)) -> dict[str, Any]:
    gid, grant = await s.store.grants.create(CLIENT_ID, "Test", scopes)
    code = await s.store.grants.put_code(
        gid, grant, redirect_uri=CALLBACK, code_challenge=CHALLENGE
    )
    status, body = await s.token(
        grant_type="authorization_code",
        code=code.reveal(),
        code_verifier=VERIFIER,
        redirect_uri=CALLBACK,
    )
    assert 200 == status, body
    return body


async def test_every_route_answers_only_under_the_issuer_name(services: Services) -> None:
    async with stack(services) as s:
        own = await s.request("GET", "/healthz")
        refused = [
            await s.request("GET", path, headers=headers)
            for path in ("/healthz", "/mcp", "/oauth/jwks.json")
            for headers in (
                {"Host": f"127.0.0.1:{s.port}"},
                {"X-Forwarded-Proto": "http"},
            )
        ]
        two = await s.request(
            "GET", "/healthz", headers={"X-Forwarded-Host": f"localhost:{s.port}, x"}
        )
    assert (200, True) == (own[0], json.loads(own[2])["configured"])
    assert [(400, b"invalid host")] * 6 == [(status, body) for status, _, body in refused]
    assert 400 == two[0]


async def test_the_metadata_documents_name_this_issuer(services: Services) -> None:
    async with stack(services) as s:
        _, headers, body = await s.request("GET", "/.well-known/oauth-authorization-server")
        _, _, prm = await s.request("GET", "/.well-known/oauth-protected-resource")
        _, _, jwks = await s.request("GET", "/oauth/jwks.json")
        post = await s.request("POST", "/.well-known/oauth-authorization-server")
    metadata = json.loads(body)
    assert {
        "issuer": s.issuer,
        "authorization_endpoint": f"{s.issuer}/oauth/authorize",
        "token_endpoint": f"{s.issuer}/oauth/token",
        "jwks_uri": f"{s.issuer}/oauth/jwks.json",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["mail.read", "mail.write", "mail.send"],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": False,
    } == metadata
    assert ("no-store", "no-cache") == (headers["Cache-Control"], headers["Pragma"])
    assert [s.issuer] == json.loads(prm)["authorization_servers"]
    assert s.env["ANGELOS_OAUTH_SIGNING_KEY_ID"] == json.loads(jwks)["keys"][0]["kid"]
    assert (405, "GET") == (post[0], post[1]["Allow"])


async def test_an_issued_token_calls_mcp_until_its_grant_is_revoked(services: Services) -> None:
    async with stack(services) as s:
        unauthenticated = await s.request("POST", "/mcp", headers=MCP_HEADERS, data="{}")
        body = await issued(s)
        first = await s.mcp(body["access_token"])
        [entry] = await s.store.grants.list_active()
        await s.store.grants.revoke(entry.handle)
        after = await s.mcp(body["access_token"])
        refreshed, refusal = await s.token(
            grant_type="refresh_token", refresh_token=body["refresh_token"]
        )
    challenge = unauthenticated[1]["WWW-Authenticate"]
    assert f'resource_metadata="{s.issuer}/.well-known/oauth-protected-resource"' in challenge
    assert (200, 401) == (first, after)
    assert (400, {"error": "invalid_grant"}) == (refreshed, refusal)


async def test_a_replayed_code_ends_the_tokens_of_its_first_redemption(
    services: Services,
) -> None:
    async with stack(services) as s:
        gid, grant = await s.store.grants.create(CLIENT_ID, "Test", ("mail.read",))
        code = await s.store.grants.put_code(
            gid, grant, redirect_uri=CALLBACK, code_challenge=CHALLENGE
        )
        exchange = {
            "grant_type": "authorization_code",
            "code": code.reveal(),
            "code_verifier": VERIFIER,
            "redirect_uri": CALLBACK,
        }
        status, body = await s.token(**exchange)
        before = await s.mcp(body["access_token"])
        replayed = await s.token(**exchange)
        after = await s.mcp(body["access_token"])
        refreshed = await s.token(grant_type="refresh_token", refresh_token=body["refresh_token"])
    assert (200, 200) == (status, before)
    assert (400, {"error": "invalid_grant"}) == replayed
    assert 401 == after
    assert (400, {"error": "invalid_grant"}) == refreshed


async def test_a_removed_client_loses_its_tokens_at_the_next_start(services: Services) -> None:
    port = free_port()
    async with stack(services, port) as s:
        body = await issued(s)
        assert 200 == await s.mcp(body["access_token"])
        gone = json.dumps(
            [{"client_id": "other", "client_name": "Other", "redirect_uris": [CALLBACK]}]
        )
    async with stack(services, port, ANGELOS_OAUTH_CLIENTS_JSON=gone) as s:
        assert 401 == await s.mcp(body["access_token"])
        status, refusal = await s.token(
            grant_type="refresh_token", refresh_token=body["refresh_token"]
        )
    assert (400, "invalid_client") == (status, refusal["error"])


@pytest.mark.parametrize(
    ("method", "headers", "query", "fields", "expected"),
    [
        ("GET", {}, "", {}, (405, "invalid_request")),
        ("POST", {"Content-Type": "application/json"}, "", {}, (400, "invalid_request")),
        ("POST", {}, "?x=1", {}, (400, "invalid_request")),
        ("POST", {"Authorization": "Basic eDp5"}, "", {}, (400, "invalid_request")),
        ("POST", {}, "", {"client_secret": "s"}, (400, "invalid_request")),
        ("POST", {}, "", {"resource": "https://localhost/other"}, (400, "invalid_target")),
        ("POST", {}, "", {"grant_type": "password"}, (400, "unsupported_grant_type")),
    ],
    ids=["get", "json", "query", "authorization", "secret", "resource", "password-grant"],
)
async def test_the_token_endpoint_refuses_before_reading_state(
    services: Services,
    method: str,
    headers: dict[str, str],
    query: str,
    fields: dict[str, str],
    expected: tuple[int, str],
) -> None:
    async with stack(services) as s:
        form = {
            "grant_type": "authorization_code",
            "client_id": CLIENT_ID,
            "resource": f"{s.issuer}/mcp",
            "code": "c" * 42 + "A",
            "code_verifier": VERIFIER,
            "redirect_uri": CALLBACK,
            **fields,
        }
        sent = {"Content-Type": "application/x-www-form-urlencoded", **headers}
        status, _, body = await s.request(
            method, f"/oauth/token{query}", headers=sent, data=urlencode(form)
        )
    assert expected == (status, json.loads(body)["error"])


async def test_authorize_refusals_redirect_only_to_a_registered_callback(
    services: Services,
) -> None:
    async with stack(services) as s:
        good = {
            "client_id": CLIENT_ID,
            "redirect_uri": CALLBACK,
            "response_type": "code",
            "state": "st",
            "resource": f"{s.issuer}/mcp",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "scope": "mail.read",
        }
        unknown = await s.request(
            "GET", "/oauth/authorize?" + urlencode({**good, "client_id": "x"})
        )
        token = await s.request(
            "GET", "/oauth/authorize?" + urlencode({**good, "response_type": "token"})
        )
    assert (400, None) == (unknown[0], unknown[1].get("Location"))
    # The owner's browser lands here: a page naming the failed check, not a bare JSON error.
    assert unknown[1]["Content-Type"].startswith("text/html")
    assert b'<code id="rule">unknown_client</code>' in unknown[2]
    assert 303 == token[0]
    location = urlsplit(token[1]["Location"])
    assert CALLBACK == f"{location.scheme}://{location.netloc}{location.path}"
    assert {"error": ["unsupported_response_type"], "iss": [s.issuer], "state": ["st"]} == parse_qs(
        location.query
    )


@contextlib.asynccontextmanager
async def broken(services: Services, **changes: str) -> AsyncIterator[Stack]:
    """A first-party service whose configuration fails validation."""
    port = free_port()
    env = {**first_party_env(services, port, "owner-broken", new_bootstrap_token()[1]), **changes}
    config = load_config(env)
    assert config.problems and config.first_party is None
    service = http_service(config, "127.0.0.1", port, None)
    runner = app_runner(service.web_app)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(services.dir / "tls" / "server.crt", services.dir / "tls" / "server.key")
    try:
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
        yield Stack(port, None, env, services.ssl_context())  # type: ignore[arg-type]
    finally:
        await runner.cleanup()


async def test_an_invalid_first_party_configuration_fails_closed_under_its_name(
    services: Services,
) -> None:
    async with broken(services, ANGELOS_OAUTH_CLIENTS_JSON="[]") as s:
        health = await s.request("GET", "/healthz")
        mcp = await s.request("POST", "/mcp", headers=MCP_HEADERS, data="{}")
        missing = [
            (await s.request("GET", path))[0]
            for path in (
                "/oauth/authorize",
                "/.well-known/oauth-authorization-server",
                "/.well-known/oauth-protected-resource",
            )
        ]
        loopback = await s.request("GET", "/healthz", headers={"Host": f"127.0.0.1:{s.port}"})
    assert (200, False) == (health[0], json.loads(health[2])["configured"])
    assert (503, [404, 404, 404], 400) == (mcp[0], missing, loopback[0])


async def test_a_malformed_issuer_refuses_every_request(services: Services) -> None:
    port = free_port()
    async with broken(services, MCP_OAUTH_ISSUER=f"https://localhost:{port}/") as s:
        answers = [(await s.request("GET", path))[:1] for path in ("/healthz", "/mcp")]
    assert [(400,), (400,)] == answers


CLIENT_B = "angelos-test-client-b"
CALLBACK_B = "https://other.example.com/callback"
SEND_SCOPES = ("mail.read", "mail.send")


def two_clients(services: Services) -> dict[str, str]:
    """Sending on in a ledger namespace of its own, and a second configured client."""
    clients = [
        {"client_id": CLIENT_ID, "client_name": "A", "redirect_uris": [CALLBACK]},
        {"client_id": CLIENT_B, "client_name": "B", "redirect_uris": [CALLBACK_B]},
    ]
    return {
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": f"t{secrets.token_hex(6)}",
        "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps(clients),
    }


async def token_for(s: Stack, client_id: str, callback: str) -> tuple[str, str]:
    """An access token of a fresh grant for `client_id`, and that grant's handle."""
    gid, grant = await s.store.grants.create(client_id, client_id, SEND_SCOPES)
    code = await s.store.grants.put_code(
        gid, grant, redirect_uri=callback, code_challenge=CHALLENGE
    )
    status, body = await s.token(
        client_id=client_id,
        grant_type="authorization_code",
        code=code.reveal(),
        code_verifier=VERIFIER,
        redirect_uri=callback,
    )
    assert 200 == status, body
    [entry] = [e for e in await s.store.grants.list_active() if e.grant.client_id == client_id]
    return body["access_token"], entry.handle


async def call(s: Stack, token: str, name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
    """One tools/call over /mcp: the HTTP status and the JSON-RPC result (None without one)."""
    message = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }  # fmt: skip
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    status, answer, body = await s.request(
        "POST", "/mcp", headers=headers, data=json.dumps(message)
    )
    if status != 200:
        return status, None
    text = body.decode()
    if answer.get("Content-Type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return status, json.loads(text)["result"]


async def prepared(s: Stack, token: str) -> dict[str, Any]:
    message = {"to": ["someone@example.test"], "subject": "Plan", "text": "Hello"}
    _, result = await call(s, token, "mail_prepare", {"action": "new", "message": message})
    assert result["isError"] is False, result
    preview: dict[str, Any] = result["structuredContent"]
    return preview


async def confirmed(s: Stack, token: str, preview: dict[str, Any]) -> tuple[int, Any]:
    arguments = {
        "prepared_id": preview["prepared_id"],
        "confirmed_digest": preview["digest"],
        "append_sent": False,
    }
    return await call(s, token, "mail_send_confirmed", arguments)


async def send_status(s: Stack, token: str, pid: str) -> str:
    _, result = await call(s, token, "mail_query", {"action": "send_status", "prepared_id": pid})
    assert result["isError"] is False, result
    value: str = result["structuredContent"]["status"]
    return value


async def test_a_preparation_is_confirmed_only_through_the_grant_that_made_it(
    services: Services,
) -> None:
    async with stack(services, **two_clients(services)) as s:
        token_a, handle_a = await token_for(s, CLIENT_ID, CALLBACK)
        token_b, _ = await token_for(s, CLIENT_B, CALLBACK_B)
        first = await prepared(s, token_a)
        _, through_b = await confirmed(s, token_b, first)
        status_through_b = await send_status(s, token_b, first["prepared_id"])
        await s.store.grants.revoke(handle_a)
        after_revocation, _ = await confirmed(s, token_a, first)
        _, still_through_b = await confirmed(s, token_b, first)
        status_after = await send_status(s, token_b, first["prepared_id"])
        second = await prepared(s, token_b)
        _, own = await confirmed(s, token_b, second)
    assert through_b["isError"] is True
    refusal = through_b["structuredContent"]
    assert "operation_failed" == refusal["error_code"]
    assert "another client's authorization" in refusal["error"], refusal
    assert "prepared" == status_through_b == status_after
    assert 401 == after_revocation
    assert still_through_b["isError"] is True
    assert own["isError"] is False, own
    assert "accepted" == own["structuredContent"]["status"]
