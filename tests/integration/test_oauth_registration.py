"""Dynamic client registration (RFC 7591) through the real authorization server.

The first-party stack on loopback TLS with the test Redis, registration switched on: a client
registers over the wire, the owner's signed-in session (made in the store, as in the native
client tests) authorizes and consents, the code reaches a real loopback listener on a random
port and is redeemed, and the refresh token rotates. Switched off, the endpoint is 404 and the
metadata does not name it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
import structlog
from aiohttp import web

from service.auth.server.browser import OwnerBrowser
from service.auth.server.store import StoreLimits
from service.auth.server.store.registrations import registration_key
from service.auth.wiring import FirstParty
from service.config import load_config
from support.angelos_process import free_port
from support.first_party import Answer, FirstPartyServer, csrf_of, first_party, pkce_pair
from support.services import Services

pytestmark = pytest.mark.services
SWITCH = {"ANGELOS_OAUTH_REGISTRATION_ENABLED": "1"}
MARK = "self-registered — its name is what it says about itself"


async def register(server: FirstPartyServer, metadata: Any, source: str | None = None) -> Answer:
    async with server.http(source) as client:
        return await client.request(
            "POST",
            "/oauth/register",
            data=metadata if isinstance(metadata, str) else json.dumps(metadata),
            headers={"Content-Type": "application/json"},
        )


def inspector(callback: str = "http://127.0.0.1:6276/oauth/callback", **extra: Any) -> dict:
    return {
        "client_name": "MCP Inspector",
        "redirect_uris": [callback],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }


def query(server: FirstPartyServer, client_id: str, redirect_uri: str, challenge: str) -> str:
    return urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": "mail.read",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": server.config.resource,
        }
    )


async def consent_page(
    server: FirstPartyServer, client_id: str, redirect_uri: str, challenge: str
) -> tuple[Answer, dict[str, str], str]:
    """As the signed-in owner: authorize and read the consent page; (page, cookie, request)."""
    signed = await server.store.sessions.sign_in(None)
    cookie = {"Cookie": f"__Host-angelos={signed.cookie.reveal()}"}
    async with server.http() as owner:
        asked = await owner.get(
            f"/oauth/authorize?{query(server, client_id, redirect_uri, challenge)}", **cookie
        )
        assert 303 == asked.status, asked.text
        page = await owner.get(asked.headers["Location"], **cookie)
        assert 200 == page.status, page.text
    request_id = parse_qs(urlsplit(asked.headers["Location"]).query)["request"][0]
    return page, cookie, request_id


async def approve(server: FirstPartyServer, page: Answer, cookie: dict, request_id: str) -> Answer:
    fields = [
        ("csrf", csrf_of(page.text)),
        ("request", request_id),
        ("decision", "approve"),
        ("scope", "mail.read"),
    ]
    async with server.http() as owner:
        return await owner.post_form("/oauth/consent", fields, **cookie)


async def token(server: FirstPartyServer, fields: dict[str, str]) -> Answer:
    async with server.http() as client:
        return await client.request(
            "POST",
            "/oauth/token",
            data=urlencode({**fields, "resource": server.config.resource}),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )


@contextlib.asynccontextmanager
async def loopback_listener() -> AsyncIterator[tuple[int, list[dict[str, list[str]]]]]:
    port, seen = free_port(), []

    async def callback(request: web.Request) -> web.Response:
        seen.append(parse_qs(request.query_string))
        return web.Response(text="you may close this window")

    app = web.Application()
    app.router.add_get("/oauth/callback", callback)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port, seen
    finally:
        await runner.cleanup()


def rule_of(page: Answer) -> str:
    return page.text.split('<code id="rule">', 1)[1].split("</code>", 1)[0]


async def test_a_registered_client_connects_on_a_random_loopback_port_and_refreshes(
    services: Services,
) -> None:
    async with (
        first_party(services, extra_env=SWITCH) as server,
        loopback_listener() as (port, seen),
    ):
        async with server.http() as client:
            metadata = await client.get("/.well-known/oauth-authorization-server")
        assert f"{server.issuer}/oauth/register" == metadata.json()["registration_endpoint"]
        registered = await register(server, inspector("http://127.0.0.1/oauth/callback"))
        assert 201 == registered.status, registered.text
        client_info = registered.json()
        client_id = client_info["client_id"]
        assert client_id.startswith("reg-") and "client_secret" not in client_info
        assert client_info["token_endpoint_auth_method"] == "none"
        ttl = await server.store.registrations.ttl_ms(client_id)
        assert 0 < ttl <= 600_000  # unconsented: ten minutes

        callback = f"http://127.0.0.1:{port}/oauth/callback"
        verifier, challenge = pkce_pair()
        page, cookie, request_id = await consent_page(server, client_id, callback, challenge)
        assert "MCP Inspector" in page.text and MARK in page.text
        answer = await approve(server, page, cookie, request_id)
        assert 303 == answer.status, answer.text
        async with aiohttp.ClientSession() as app, app.get(answer.headers["Location"]) as got:
            assert 200 == got.status
        [delivered] = seen
        assert "state" not in delivered  # none sent, none returned
        assert await server.store.registrations.ttl_ms(client_id) > 29 * 86400 * 1000
        pending = await server.store.core.client.zcard(
            f"{server.store.core.keys.prefix}registrations:pending"
        )
        assert 0 == pending  # consented: no longer counted as pending

        issued = await token(
            server,
            {
                "grant_type": "authorization_code",
                "client_id": client_id,
                "code": delivered["code"][0],
                "code_verifier": verifier,
                "redirect_uri": callback,
            },
        )
        assert 200 == issued.status, issued.text
        refreshed = await token(
            server,
            {
                "grant_type": "refresh_token",
                "client_id": client_id,
                "refresh_token": issued.json()["refresh_token"],
            },
        )
        assert 200 == refreshed.status, refreshed.text
        assert refreshed.json()["refresh_token"] != issued.json()["refresh_token"]

        grants = await owner_grants_page(server, cookie)
        assert "MCP Inspector" in grants and MARK in grants


async def owner_grants_page(server: FirstPartyServer, cookie: dict[str, str]) -> str:
    async with server.http() as owner:
        page = await owner.get("/oauth/grants", **cookie)
    assert 200 == page.status, page.text
    return page.text


async def test_switched_off_the_endpoint_is_404_and_not_advertised(services: Services) -> None:
    async with first_party(services) as server:
        async with server.http() as client:
            metadata = await client.get("/.well-known/oauth-authorization-server")
        assert "registration_endpoint" not in metadata.json()
        answer = await register(server, inspector())
        assert 404 == answer.status


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        (inspector("http://example.com/cb"), "invalid_redirect_uri"),
        (inspector("myapp:/cb"), "invalid_redirect_uri"),
        ({"client_name": "x", "redirect_uris": []}, "invalid_redirect_uri"),
        (inspector(token_endpoint_auth_method="client_secret_post"), "invalid_client_metadata"),
        (inspector(client_secret="s"), "invalid_client_metadata"),
        (inspector(grant_types=["client_credentials"]), "invalid_client_metadata"),
        (inspector(response_types=["token"]), "invalid_client_metadata"),
        (inspector(client_name=""), "invalid_client_metadata"),
        ('{"client_name": "a", "client_name": "b"}', "invalid_client_metadata"),
    ],
    ids=[
        "http-elsewhere",
        "dotless-scheme",
        "no-callbacks",
        "secret-method",
        "secret",
        "grant-type",
        "response-type",
        "empty-name",
        "repeated-member",
    ],
)
async def test_each_metadata_rule_is_refused_by_name(
    services: Services, metadata: Any, error: str
) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        answer = await register(server, metadata)
        assert 400 == answer.status
        assert error == answer.json()["error"] and answer.json()["error_description"]
        assert [] == [
            key
            async for key in server.store.core.client.scan_iter(
                match=f"{server.store.core.keys.prefix}registration:*"
            )
        ]


async def test_registrations_spend_a_per_source_budget(services: Services) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        for _ in range(10):
            assert 201 == (await register(server, inspector(), "127.0.0.2")).status
        limited = await register(server, inspector(), "127.0.0.2")
        assert (429, {"error": "temporarily_unavailable"}) == (limited.status, limited.json())
        assert "Retry-After" in limited.headers
        assert 201 == (await register(server, inspector(), "127.0.0.3")).status


async def test_an_unconsented_registration_expires(services: Services) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        server.store.core.limits = StoreLimits(registration_pending_s=1)  # ten minutes, shortened
        client_id = (await register(server, inspector())).json()["client_id"]
        _, challenge = pkce_pair()
        callback = "http://127.0.0.1:6276/oauth/callback"
        page, cookie, request_id = await consent_page(server, client_id, callback, challenge)
        key = registration_key(server.store.core, client_id)
        for _ in range(40):  # the key's own TTL ends it
            if not await server.store.core.client.exists(key):
                break
            await asyncio.sleep(0.05)
        assert not await server.store.core.client.exists(key)
        expired = await approve(server, page, cookie, request_id)
        assert 400 == expired.status and "registration expired" in expired.text
        assert [] == await server.store.grants.list_active()
        async with server.http() as browser:
            again = await browser.get(
                f"/oauth/authorize?{query(server, client_id, callback, challenge)}"
            )
        assert (400, "registration_unknown") == (again.status, rule_of(again))


async def test_the_online_grant_check_serves_a_registered_client_while_the_switch_is_on(
    services: Services,
) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        client_id = (await register(server, inspector())).json()["client_id"]
        gid, grant = await server.store.grants.create(
            client_id, "MCP Inspector", ("mail.read",), self_registered=True
        )
        ledger = SimpleNamespace(client=server.store.core.client)
        app: Any = SimpleNamespace(sending=SimpleNamespace(store=ledger))

        def gate(switch: str) -> FirstParty:
            loaded = load_config({**server.env, "ANGELOS_OAUTH_REGISTRATION_ENABLED": switch})
            assert loaded.first_party is not None and loaded.http_auth is not None
            return FirstParty(loaded.first_party, loaded.http_auth, app, OwnerBrowser)

        check = (gid.reveal(), client_id, grant.subject, ("mail.read",))
        assert await gate("1").grant_active(*check)
        assert not await gate("0").grant_active(*check)  # switched off: its tokens stop


async def test_at_most_so_many_registrations_wait_for_consent(services: Services) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        server.store.core.limits = StoreLimits(max_pending_registrations=2)
        for source in ("127.0.0.2", "127.0.0.3"):
            assert 201 == (await register(server, inspector(), source)).status
        with structlog.testing.capture_logs() as logs:
            full = await register(server, inspector(), "127.0.0.4")
        assert (429, {"error": "temporarily_unavailable"}) == (full.status, full.json())
        assert [("registration_refused", "registrations_pending_full")] == [
            (e["event"], e.get("rule")) for e in logs if e["event"].startswith("registration")
        ]


async def test_registrations_and_refusals_are_logged_without_callbacks(
    services: Services,
) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        callbacks = ["http://127.0.0.1:6276/oauth/callback", "cursor://secret-host/cb"]
        with structlog.testing.capture_logs() as logs:
            client_id = (await register(server, inspector(redirect_uris=callbacks))).json()[
                "client_id"
            ]
            await register(server, inspector(token_endpoint_auth_method="client_secret_basic"))
        events = [
            {
                k: v
                for k, v in e.items()
                if k in ("event", "client_id", "rule", "redirect_uri_kinds")
            }
            for e in logs
        ]
        assert [
            {
                "event": "client_registered",
                "client_id": client_id,
                "redirect_uri_kinds": "loopback private-use",
            },
            {"event": "registration_refused", "rule": "auth_method"},
        ] == events
        assert "secret-host" not in repr(logs) and "6276" not in repr(logs)


async def test_a_callback_off_the_registration_is_a_page_naming_the_check(
    services: Services,
) -> None:
    async with first_party(services, extra_env=SWITCH) as server:
        client_id = (await register(server, inspector())).json()["client_id"]
        _, challenge = pkce_pair()
        async with server.http() as browser:
            for callback in ("http://127.0.0.1:6276/other", "http://localhost:6276/oauth/callback"):
                page = await browser.get(
                    f"/oauth/authorize?{query(server, client_id, callback, challenge)}"
                )
                assert (400, "redirect_uri_not_registered") == (page.status, rule_of(page))
