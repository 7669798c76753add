"""The signing-key cache against a real key server over TLS: expiry, throttle, rotation, limits.

The cache's clock is the test's, so "a minute later" costs nothing; every fetch is a real
HTTPS request to the key server on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from service.auth.resource.jwt import TokenRules
from service.auth.resource.key_cache import HttpsKeySource, KeyCache
from service.auth.resource.verifier import AuthFailure, TokenVerifier
from support.clock import Clock
from support.jwks_server import JwksServer, jwks_server
from support.services import Services
from support.silent import silent_listener
from support.tokens import Minter, ec_key, jwks_document, rsa_key

pytestmark = pytest.mark.services


@pytest_asyncio.fixture
async def jwks(services: Services) -> AsyncIterator[JwksServer]:
    async with jwks_server(services.dir / "tls") as server:
        yield server


@contextlib.asynccontextmanager
async def cache_for(services: Services, url: str, clock: Clock) -> AsyncIterator[KeyCache]:
    cache = KeyCache(HttpsKeySource(url, str(services.ca_file), True), clock)
    try:
        yield cache
    finally:
        await cache.aclose()


async def test_an_unknown_kid_fetches_once_a_minute_and_rotation_takes_effect(
    services: Services, jwks: JwksServer
) -> None:
    old, new = rsa_key("key-1"), rsa_key("key-rotated")
    jwks.document = jwks_document([old])
    clock = Clock()
    async with cache_for(services, jwks.jwks_url, clock) as cache:
        assert "key-1" == (await cache.key_for("key-1", "RS256")).kid  # type: ignore[union-attr]
        clock.now += 61
        misses = [await cache.key_for("key-rotated", "RS256") for _ in range(8)]
        assert ([None] * 8, 2) == (misses, jwks.fetches)  # one extra fetch for eight misses
        jwks.document = jwks_document([new])  # the issuer rotates
        assert None is await cache.key_for("key-rotated", "RS256")  # not within the minute
        clock.now += 61
        rotated = await cache.key_for("key-rotated", "RS256")
        assert ("key-rotated", 3) == (rotated.kid if rotated else None, jwks.fetches)
        assert None is await cache.key_for("key-1", "RS256")  # the removed key stops at once


async def test_an_expired_set_is_not_revived_by_a_failed_refresh_and_the_retry_waits(
    services: Services, jwks: JwksServer
) -> None:
    jwks.document = jwks_document([rsa_key()])
    clock = Clock()
    async with cache_for(services, jwks.jwks_url, clock) as cache:
        assert await cache.key_for("key-1", "RS256") is not None
        clock.now += 301  # past the five-minute lifetime
        jwks.status = 503
        assert [None, None] == [await cache.key_for("key-1", "RS256") for _ in range(2)]
        assert 2 == jwks.fetches  # the second miss waits for the next minute
        jwks.status = 200
        clock.now += 61
        assert await cache.key_for("key-1", "RS256") is not None


async def test_a_hit_needs_the_keys_own_algorithm(services: Services, jwks: JwksServer) -> None:
    jwks.document = jwks_document([rsa_key(), ec_key()])
    async with cache_for(services, jwks.jwks_url, Clock()) as cache:
        assert None is await cache.key_for("key-1", "ES256")
        assert await cache.key_for("key-2", "ES256") is not None


async def test_twenty_four_concurrent_misses_share_one_fetch(
    services: Services, jwks: JwksServer
) -> None:
    jwks.document = jwks_document([rsa_key(), ec_key()])
    async with cache_for(services, jwks.jwks_url, Clock()) as cache:
        found = await asyncio.gather(*(cache.key_for("key-1", "RS256") for _ in range(24)))
        assert (24, 1) == (sum(key is not None for key in found), jwks.fetches)


async def test_a_redirect_is_a_failed_fetch_of_one_request(
    services: Services, jwks: JwksServer
) -> None:
    jwks.document = jwks_document([rsa_key()])
    jwks.redirect_to = jwks.jwks_url  # would serve the keys if followed
    async with cache_for(services, jwks.jwks_url, Clock()) as cache:
        assert (None, 1) == (await cache.key_for("key-1", "RS256"), jwks.fetches)


@pytest.mark.parametrize(
    "document",
    [
        b'{"keys": []}',
        b'{"keys": [' + b" " * (256 * 1024) + b"]}",
        b'{"KEYS": []}',
        b"not json",
    ],
    ids=["empty", "over-256-KiB", "KEYS", "not-json"],
)
async def test_an_unusable_document_gives_no_keys(
    services: Services, jwks: JwksServer, document: bytes
) -> None:
    jwks.document = document
    async with cache_for(services, jwks.jwks_url, Clock()) as cache:
        assert None is await cache.key_for("key-1", "RS256")


async def test_an_issuer_that_never_answers_fails_closed_within_the_fetch_timeout(
    services: Services,
) -> None:
    minter = Minter()
    with silent_listener() as port:
        url = f"https://localhost:{port}/jwks.json"
        async with cache_for(services, url, Clock()) as cache:
            verifier = TokenVerifier(minter.rules, cache)
            started = time.monotonic()
            with pytest.raises(AuthFailure) as refused:
                await verifier.principal(minter.token())
            elapsed = time.monotonic() - started
    assert (401, "unknown-kid") == (refused.value.status, refused.value.rule)
    assert 4.5 < elapsed < 15  # the 5 s fetch timeout, with room for a busy machine


async def test_an_issuer_that_refuses_connections_fails_closed_at_once(
    services: Services,
) -> None:
    minter = Minter()
    with silent_listener() as port:
        pass  # closed again: nothing listens there now
    async with cache_for(services, f"https://localhost:{port}/jwks.json", Clock()) as cache:
        with pytest.raises(AuthFailure) as refused:
            await TokenVerifier(minter.rules, cache).principal(minter.token())
    assert 401 == refused.value.status


class SlowSource:
    """A key source that answers after the token has expired (the test's clock moves)."""

    def __init__(self, clock: Clock, document: bytes) -> None:
        self.clock, self.document = clock, document

    async def fetch(self) -> bytes:
        self.clock.now += 120
        return self.document

    async def aclose(self) -> None:
        return None


async def test_a_token_that_expires_during_the_key_fetch_is_refused() -> None:
    minter = Minter()
    clock = Clock()
    clock.now = float(minter.now)
    token = minter.token(claims={"exp": minter.now + 60})
    cache = KeyCache(SlowSource(clock, minter.jwks()), clock)
    verifier = TokenVerifier(
        TokenRules(minter.issuer, minter.resource, frozenset({"owner-123"})), cache, clock
    )
    with pytest.raises(AuthFailure) as refused:
        await verifier.principal(token)
    assert (401, "exp") == (refused.value.status, refused.value.rule)


async def test_without_the_private_hosts_switch_a_loopback_key_server_is_never_dialled(
    services: Services, jwks: JwksServer
) -> None:
    jwks.document = jwks_document([rsa_key()])
    source = HttpsKeySource(jwks.jwks_url, str(services.ca_file), allow_private_hosts=False)
    cache = KeyCache(source, Clock())
    try:
        assert (None, 0) == (await cache.key_for("key-1", "RS256"), jwks.fetches)
    finally:
        await cache.aclose()
