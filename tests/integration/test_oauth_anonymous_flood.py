"""F1: no anonymous visitor can starve the owner.

Eight flood sources (127.0.0.2..127.0.0.9, each an aiohttp client whose connections are bound
to that loopback address, without a cookie jar) send anonymous requests at 20 a second for 60
seconds: in turn a cookieless `GET /oauth/authorize`, a cookieless `GET /oauth/login`, and a
sign-in begun (`GET /oauth/login`, then `POST /oauth/passkeys/login/begin` with that page's
cookie and CSRF value). Meanwhile the owner, in headless Chromium from 127.0.0.1, enrols the
first passkey, signs in, approves the client, logs out, signs in again and approves a second
connection; both codes redeem. The Redis memory the flood leaves behind is printed.

A smaller test shows X-Forwarded-For counting per source only through a trusted proxy.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from support.browser import Page, browser
from support.first_party import (
    CALLBACK,
    FirstPartyServer,
    csrf_of,
    first_party,
    pkce_pair,
)
from support.services import Services

pytestmark = pytest.mark.services
FLOOD_SOURCES = tuple(f"127.0.0.{n}" for n in range(2, 10))
RATE_PER_S = 20
FLOOD_S = 60
KINDS = ("authorize", "login", "begin")
BEGIN = "/oauth/passkeys/login/begin"
STATUS = "(document.getElementById('status')?.textContent ?? '')"
NAVIGATION_STATUS = "performance.getEntriesByType('navigation')[0].responseStatus"
PAGE_TIMEOUT_S = 45.0  # a busy 2-core machine under the flood; the flow usually takes seconds


class Flood:
    """Anonymous requests from the flood sources, counted by kind and answer."""

    def __init__(self, server: FirstPartyServer) -> None:
        self.server = server
        self.answers: collections.Counter[tuple[str, int]] = collections.Counter()
        self.sent = 0
        _, self.challenge = pkce_pair()

    async def run(self, sessions: list[aiohttp.ClientSession]) -> None:
        """Fire one request every 1/20 s for 60 s, without waiting for earlier answers."""
        tasks: list[asyncio.Task[None]] = []
        start = time.monotonic()
        for tick in range(RATE_PER_S * FLOOD_S):
            await asyncio.sleep(max(0.0, start + tick / RATE_PER_S - time.monotonic()))
            session = sessions[tick % len(sessions)]
            kind = KINDS[(tick // len(sessions)) % len(KINDS)]
            tasks.append(asyncio.create_task(self.one(session, kind)))
        await asyncio.gather(*tasks)

    async def one(self, session: aiohttp.ClientSession, kind: str) -> None:
        issuer = self.server.issuer
        if kind == "authorize":
            url = self.server.authorize_url(challenge=self.challenge)
            await self.get(session, "authorize", url)
            return
        page = await self.get(session, "login", f"{issuer}/oauth/login")
        if kind == "login" or page is None:
            return
        cookie, text = page
        headers = {
            "Origin": issuer,
            "Content-Type": "application/json",
            "X-CSRF-Token": csrf_of(text),
            "Cookie": f"__Host-angelos={cookie}",
        }
        self.sent += 1
        async with session.post(f"{issuer}{BEGIN}", data="{}", headers=headers) as answer:
            await answer.read()
            self.answers["begin", answer.status] += 1

    async def get(
        self, session: aiohttp.ClientSession, kind: str, url: str
    ) -> tuple[str, str] | None:
        self.sent += 1
        async with session.get(url, allow_redirects=False) as answer:
            text = await answer.text()
            self.answers[kind, answer.status] += 1
            cookie = answer.cookies.get("__Host-angelos")
            return None if cookie is None else (cookie.value, text)


async def settle(page: Page, ready_js: str) -> None:
    """Wait until `ready_js` holds on the page, failing early with the page's status line."""
    found = await page.wait_for(
        f"({ready_js}) ? 'ready' : ({STATUS}).startsWith('failed') && {STATUS}",
        timeout=PAGE_TIMEOUT_S,
    )
    assert "ready" == found


async def approve(page: Page, seen: list[str]) -> dict[str, list[str]]:
    """Press Allow; return the query the browser was sent to the callback with (`seen` is
    the list of callback URLs the page answered locally)."""
    before = len(seen)
    async with page.navigation():
        await page.click("#approve")
    [url] = seen[before:]
    return parse_qs(urlsplit(url).query)


async def owner_flow(server: FirstPartyServer, page: Page, steps: list[tuple[str, int]]) -> None:
    """Enrol, sign in, approve; log out, sign in again, approve again; redeem both codes."""

    async def landed(step: str) -> None:
        steps.append((step, await page.evaluate(NAVIGATION_STATUS)))

    seen = await page.answer_locally(f"{CALLBACK}?*", "<p>client callback</p>")
    await asyncio.sleep(5)  # the flood is under way: its sources' budgets are being spent
    verifier, challenge = pkce_pair()
    await page.goto(server.authorize_url(state="first", challenge=challenge))
    await landed("authorize (enrolment page)")
    await page.fill("#bootstrap-token", server.bootstrap_token)
    async with page.navigation():  # the page reloads the authorize URL once enrolled
        await page.click("#enrol-button")
    await settle(page, "document.getElementById('sign-in-button')")
    await landed("enrolled: authorize again (sign-in page)")
    async with page.navigation():
        await page.click("#sign-in-button")
    await settle(page, "document.getElementById('approve')")
    await landed("signed in: consent")
    first = await approve(page, seen)
    redeemed = await server.exchange_code(first["code"][0], verifier)
    steps.append(("first code redeemed", redeemed.status))

    await asyncio.sleep(10)  # the flood goes on
    await page.goto(f"{server.issuer}/oauth/grants")
    await landed("grants")
    async with page.navigation():
        await page.click("#logout button")
    await landed("logged out: sign-in page")
    verifier, challenge = pkce_pair()
    await page.goto(server.authorize_url(state="second", challenge=challenge))
    await landed("authorize again (sign-in page)")
    async with page.navigation():
        await page.click("#sign-in-button")
    await settle(page, "document.getElementById('approve')")
    await landed("signed in again: consent")
    second = await approve(page, seen)
    redeemed = await server.exchange_code(second["code"][0], verifier)
    steps.append(("second code redeemed", redeemed.status))
    assert (["first"], ["second"]) == (first["state"], second["state"])


async def namespace(server: FirstPartyServer) -> tuple[int, dict[str, int]]:
    """Redis's used_memory and the keys under this server's OAuth namespace, by bucket."""
    client = server.store.core.client
    prefix = server.store.core.keys.prefix
    buckets: collections.Counter[str] = collections.Counter()
    async for key in client.scan_iter(match=f"{prefix}*", count=1000):
        buckets[key.decode()[len(prefix) :].split(":", 1)[0]] += 1
    memory = await client.info("memory")
    return int(memory["used_memory"]), dict(buckets)


async def test_a_flood_from_eight_sources_leaves_the_owner_signing_in_and_approving(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        memory_before, keys_before = await namespace(server)
        flood = Flood(server)
        sessions = [
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    ssl=server.ssl_context, local_addr=(source, 0), limit=0
                ),
                cookie_jar=aiohttp.DummyCookieJar(),  # every request arrives cookieless
            )
            for source in FLOOD_SOURCES
        ]
        steps: list[tuple[str, int]] = []
        started = time.monotonic()
        try:
            async with asyncio.timeout(FLOOD_S + 120):
                await asyncio.gather(flood.run(sessions), owner_flow(server, page, steps))
        finally:
            for session in sessions:
                await session.close()
        elapsed = time.monotonic() - started
        memory_after, keys_after = await namespace(server)

    answers: dict[str, Any] = {f"{kind} {status}": n for (kind, status), n in flood.answers.items()}
    print(
        f"\nF1 flood: {flood.sent} anonymous requests from {len(FLOOD_SOURCES)} sources in"
        f" {elapsed:.1f} s; answers {dict(sorted(answers.items()))}"
        f"\nowner steps: {steps}"
        f"\nRedis used_memory {memory_before} -> {memory_after} bytes"
        f" ({memory_after - memory_before:+d}); OAuth keys {keys_before} -> {keys_after}"
        f" ({sum(keys_after.values())} keys)"
    )
    assert all(status in (200, 303) for _, status in steps), steps
    assert 9 == len(steps)
    # Page views store nothing and are never refused; begins are refused per source only.
    assert {200} == {status for (kind, status) in flood.answers if kind != "begin"}
    assert {(kind, status) for (kind, status) in flood.answers} <= {
        ("authorize", 200),
        ("login", 200),
        ("begin", 200),
        ("begin", 409),  # before the owner enrolled: no passkey to sign in with
        ("begin", 429),
    }
    assert flood.answers["begin", 429] > 0
    per_window = 20 * len(FLOOD_SOURCES)  # PASSKEY_BEGIN per source, each window
    assert flood.answers["begin", 200] + flood.answers["begin", 409] <= 3 * per_window
    # The flood leaves challenges and counters, never a session or a consent of its own.
    assert keys_after.get("session", 0) <= 2 and keys_after.get("consent", 0) == 0
    assert keys_after.get("challenge", 0) <= 3 * per_window + 4


async def test_forwarded_addresses_count_apart_only_through_a_trusted_proxy(
    services: Services,
) -> None:
    trusted = {"ANGELOS_TRUSTED_PROXIES": "127.0.0.1"}
    async with first_party(services, extra_env=trusted) as server:

        async def begins(source: str, forwarded: str, n: int) -> list[int]:
            statuses = []
            async with server.http(source) as visitor:
                page = await visitor.get("/oauth/login", **{"X-Forwarded-For": forwarded})
                csrf = csrf_of(page.text)
                for _ in range(n):
                    answer = await visitor.post_json(
                        BEGIN, {}, csrf, **{"X-Forwarded-For": forwarded}
                    )
                    statuses.append(answer.status)
            return statuses

        # Through the trusted proxy (127.0.0.1) each forwarded client has its own 20.
        first = await begins("127.0.0.1", "198.51.100.1", 21)
        second = await begins("127.0.0.1", "203.0.113.5, 198.51.100.2", 1)
        # From an untrusted peer the header is ignored: 127.0.0.2's own budget, shared.
        spoofed = [
            (await begins("127.0.0.2", f"192.0.2.{n}", 1))[0] for n in range(1, 22)
        ]

    assert [409] * 20 + [429] == first  # 409: no owner enrolled yet, but the budget is spent
    assert [409] == second
    assert [409] * 20 + [429] == spoofed
