"""Native apps and metadata-document clients through the real authorization server.

The server is the first-party stack on loopback TLS with the test Redis. The owner's signed-in
session is made in the store, where a passkey sign-in would have made it (the ceremonies have
their own tests); authorize, consent, the redirect and the token exchange then cross the wire.
A loopback callback is a real HTTP listener on a random port; a metadata document is served by a
real HTTPS server with the test CA.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
from aiohttp import web

from support.angelos_process import free_port
from support.first_party import (
    CALLBACK,
    CLIENT_ID,
    CLIENT_NAME,
    Answer,
    FirstPartyServer,
    csrf_of,
    first_party,
    pkce_pair,
)
from support.jwks_server import JwksServer, jwks_server
from support.services import Services

pytestmark = pytest.mark.services
NATIVE_ID = "angelos-native"
LOOPBACK = "http://127.0.0.1/oauth/callback"  # registered without a port
CURSOR = "cursor://anysphere.cursor-retrieval/oauth/callback"


def native_env(services: Services, **extra: str) -> dict[str, str]:
    web_client = {"client_id": CLIENT_ID, "client_name": CLIENT_NAME, "redirect_uris": [CALLBACK]}
    native = {
        "client_id": NATIVE_ID,
        "client_name": "Local Editor",
        "redirect_uris": [LOOPBACK, CURSOR],
        "native": True,
    }
    return {
        "ANGELOS_OAUTH_CLIENTS_JSON": json.dumps([web_client, native]),
        "MCP_OAUTH_CA_FILE": str(services.ca_file),
        **extra,
    }


def query(server: FirstPartyServer, client_id: str, redirect_uri: str, challenge: str) -> str:
    return urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": "mail.read",
            "state": "s-1",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": server.config.resource,
        }
    )


async def consented(
    server: FirstPartyServer, client_id: str, redirect_uri: str, challenge: str
) -> tuple[Answer, str]:
    """As the signed-in owner: authorize, read the consent page, allow; (page, Location)."""
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
        fields = [
            ("csrf", csrf_of(page.text)),
            ("request", request_id),
            ("decision", "approve"),
            ("scope", "mail.read"),
        ]
        answer = await owner.post_form("/oauth/consent", fields, **cookie)
        assert 303 == answer.status, answer.text
        return page, answer.headers["Location"]


async def redeem(
    server: FirstPartyServer, client_id: str, redirect_uri: str, code: str, verifier: str
) -> Answer:
    fields = {
        "grant_type": "authorization_code",
        "client_id": client_id,
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": redirect_uri,
        "resource": server.config.resource,
    }
    async with server.http() as client:
        return await client.request(
            "POST",
            "/oauth/token",
            data=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )


async def refusal(server: FirstPartyServer, client_id: str, redirect_uri: str) -> Answer:
    """An anonymous browser's authorize request that must be refused with a page."""
    _, challenge = pkce_pair()
    async with server.http() as browser:
        return await browser.get(
            f"/oauth/authorize?{query(server, client_id, redirect_uri, challenge)}"
        )


def rule_of(page: Answer) -> str:
    assert page.headers["Content-Type"].startswith("text/html")
    return page.text.split('<code id="rule">', 1)[1].split("</code>", 1)[0]


@contextlib.asynccontextmanager
async def loopback_listener() -> AsyncIterator[tuple[int, list[dict[str, list[str]]]]]:
    """A native app's loopback listener on a random port, recording what its callback gets."""
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


async def test_a_native_app_gets_its_code_on_a_random_loopback_port(services: Services) -> None:
    async with (
        first_party(services, extra_env=native_env(services)) as server,
        loopback_listener() as (port, seen),
    ):
        callback = f"http://127.0.0.1:{port}/oauth/callback"
        verifier, challenge = pkce_pair()
        page, location = await consented(server, NATIVE_ID, callback, challenge)
        assert "127.0.0.1 (an application on this computer)" in page.text
        assert (
            f"form-action 'self' http://127.0.0.1:{port};"
            in page.headers["Content-Security-Policy"]
        )
        assert location.startswith(f"{callback}?code=")
        async with aiohttp.ClientSession() as app, app.get(location) as delivered:
            assert 200 == delivered.status
        [got] = seen
        assert (["s-1"], [server.issuer]) == (got["state"], got["iss"])
        token = await redeem(server, NATIVE_ID, callback, got["code"][0], verifier)
        assert 200 == token.status, token.text
        assert "mail.read" == token.json()["scope"]


async def test_the_code_of_one_port_is_not_redeemed_for_another(services: Services) -> None:
    async with first_party(services, extra_env=native_env(services)) as server:
        verifier, challenge = pkce_pair()
        callback = "http://127.0.0.1:50001/oauth/callback"
        _, location = await consented(server, NATIVE_ID, callback, challenge)
        code = parse_qs(urlsplit(location).query)["code"][0]
        other = "http://127.0.0.1:50002/oauth/callback"  # matches the registration, not the code
        refused = await redeem(server, NATIVE_ID, other, code, verifier)
        assert (400, {"error": "invalid_grant"}) == (refused.status, refused.json())
        assert 200 == (await redeem(server, NATIVE_ID, callback, code, verifier)).status


async def test_a_native_app_gets_its_code_on_a_private_use_scheme(services: Services) -> None:
    async with first_party(services, extra_env=native_env(services)) as server:
        verifier, challenge = pkce_pair()
        page, location = await consented(server, NATIVE_ID, CURSOR, challenge)
        assert "the application that opens <code>cursor:</code> links" in page.text
        assert "cursor://anysphere.cursor-retrieval;" in page.headers["Content-Security-Policy"]
        assert location.startswith(f"{CURSOR}?code=")
        code = parse_qs(urlsplit(location).query)["code"][0]
        token = await redeem(server, NATIVE_ID, CURSOR, code, verifier)
        assert 200 == token.status, token.text


@pytest.mark.parametrize(
    ("client_id", "redirect_uri"),
    [
        (NATIVE_ID, "http://127.0.0.1:50003/oauth/other"),
        (NATIVE_ID, "http://evil.example:50003/oauth/callback"),
        (NATIVE_ID, "http://127.0.0.1:50003@evil.example/oauth/callback"),
        (NATIVE_ID, "http://localhost:50003/oauth/callback"),
        (NATIVE_ID, "cursor://evil/oauth/callback"),
        (CLIENT_ID, "http://127.0.0.1:50003/callback"),
    ],
    ids=["path", "http-elsewhere", "second-host", "other-loopback-name", "scheme", "web-client"],
)
async def test_a_callback_off_the_registration_is_a_page_naming_the_check(
    services: Services, client_id: str, redirect_uri: str
) -> None:
    async with first_party(services, extra_env=native_env(services)) as server:
        page = await refusal(server, client_id, redirect_uri)
        assert (400, "redirect_uri_not_registered") == (page.status, rule_of(page))


def document(url: str, **changes: Any) -> bytes:
    body = {
        "client_id": url,
        "client_name": "Metadata Editor",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
        **changes,
    }
    return json.dumps(body).encode()


@contextlib.asynccontextmanager
async def metadata_stack(
    services: Services, switch: str = "1"
) -> AsyncIterator[tuple[FirstPartyServer, JwksServer]]:
    env = native_env(services, ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=switch)
    async with (
        jwks_server(services.dir / "tls") as site,
        first_party(services, extra_env=env) as server,
    ):
        site.document = document(site.jwks_url)
        yield server, site


async def test_a_metadata_document_client_connects_and_its_host_is_named(
    services: Services,
) -> None:
    async with metadata_stack(services) as (server, site):
        verifier, challenge = pkce_pair()
        callback = "http://127.0.0.1:50004/callback"
        page, location = await consented(server, site.jwks_url, callback, challenge)
        assert "Metadata Editor" in page.text
        assert f'<strong class="client-host">localhost:{site.port}</strong>' in page.text
        assert "127.0.0.1 (an application on this computer)" in page.text
        code = parse_qs(urlsplit(location).query)["code"][0]
        fetched = site.fetches
        token = await redeem(server, site.jwks_url, callback, code, verifier)
        assert 200 == token.status, token.text
        assert fetched == site.fetches  # the token exchange fetched nothing
        grants = await server.store.grants.list_active()
        assert [("Metadata Editor", site.jwks_url)] == [
            (entry.grant.client_name, entry.grant.client_id) for entry in grants
        ]


async def test_a_document_naming_another_client_id_is_refused(services: Services) -> None:
    async with metadata_stack(services) as (server, site):
        site.document = document("https://localhost/other.json")
        page = await refusal(server, site.jwks_url, "http://127.0.0.1:50005/callback")
        assert (400, "client_metadata_identity") == (page.status, rule_of(page))


async def test_a_callback_the_document_does_not_list_is_refused(services: Services) -> None:
    async with metadata_stack(services) as (server, site):
        page = await refusal(server, site.jwks_url, "http://127.0.0.1:50006/elsewhere")
        assert (400, "redirect_uri_not_registered") == (page.status, rule_of(page))


async def test_an_unreachable_document_is_refused_with_a_page_naming_the_rule(
    services: Services,
) -> None:
    async with metadata_stack(services) as (server, _):
        nowhere = f"https://localhost:{free_port()}/client.json"
        page = await refusal(server, nowhere, "http://127.0.0.1:50007/callback")
        assert (503, "client_metadata_unavailable") == (page.status, rule_of(page))
        assert "could not be fetched" in page.text


async def test_with_the_switch_off_a_metadata_client_is_refused_unfetched(
    services: Services,
) -> None:
    async with metadata_stack(services, switch="0") as (server, site):
        page = await refusal(server, site.jwks_url, "http://127.0.0.1:50008/callback")
        assert (400, "client_metadata_disabled", 0) == (page.status, rule_of(page), site.fetches)
