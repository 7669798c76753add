"""A native client's callback through a real browser: after the owner approves in headless
Chromium, the consent page's answer reaches an app listening on a loopback port the client chose
at request time (the page's form-action policy and the redirect let it through).
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs, urlencode

import pytest
from aiohttp import web
from integration.test_oauth_browser_flow import enrol_and_sign_in, settle

from support.angelos_process import free_port
from support.browser import browser
from support.first_party import CALLBACK, CLIENT_ID, CLIENT_NAME, first_party, pkce_pair
from support.services import Services

pytestmark = pytest.mark.services
NATIVE_ID = "native-app"
NATIVE = {
    "client_id": NATIVE_ID,
    "client_name": "Native App",
    "native": True,
    "redirect_uris": ["http://127.0.0.1/oauth/callback"],
}
WEB = {"client_id": CLIENT_ID, "client_name": CLIENT_NAME, "redirect_uris": [CALLBACK]}


async def test_approval_reaches_a_native_app_on_the_loopback_port_it_chose(
    services: Services,
) -> None:
    port = free_port()
    received: asyncio.Queue[dict[str, list[str]]] = asyncio.Queue()

    async def callback(request: web.Request) -> web.Response:
        received.put_nowait(parse_qs(request.rel_url.raw_query_string))
        return web.Response(text="native app: you may close this window")

    app = web.Application()
    app.router.add_get("/oauth/callback", callback)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    clients = {"ANGELOS_OAUTH_CLIENTS_JSON": json.dumps([WEB, NATIVE])}
    tls = services.dir / "tls"
    try:
        async with (
            first_party(services, extra_env=clients) as server,
            browser(trust=tls / "server.crt") as chromium,
        ):
            page = await chromium.open_page()
            await page.add_virtual_authenticator(user_verified=True)
            verifier, challenge = pkce_pair()
            await enrol_and_sign_in(server, page, challenge)  # the web client's request waits
            redirect_uri = f"http://127.0.0.1:{port}/oauth/callback"
            query = urlencode(
                {
                    "response_type": "code",
                    "client_id": NATIVE_ID,
                    "redirect_uri": redirect_uri,
                    "scope": "mail.read",
                    "state": "native-1",
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                    "resource": server.config.resource,
                }
            )
            await page.goto(f"{server.issuer}/oauth/authorize?{query}")
            await settle(page, "document.getElementById('approve')")
            assert "an application on this computer" in await page.evaluate(
                "document.body.textContent"
            )
            async with page.navigation():
                await page.click("#approve")
            answer = await asyncio.wait_for(received.get(), 30)
            assert (["native-1"], [server.issuer]) == (answer["state"], answer["iss"])
            assert f"http://127.0.0.1:{port}/oauth/callback" in await page.current_url()
            fields = {
                "grant_type": "authorization_code",
                "client_id": NATIVE_ID,
                "code": answer["code"][0],
                "code_verifier": verifier,
                "redirect_uri": redirect_uri,
                "resource": server.config.resource,
            }
            async with server.http() as client:
                token = await client.request(
                    "POST",
                    "/oauth/token",
                    data=urlencode(fields),
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
            assert 200 == token.status and "mail.read" == token.json()["scope"]
    finally:
        await runner.cleanup()
