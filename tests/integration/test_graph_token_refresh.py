"""Graph token refreshes with their rotated refresh tokens kept in the real Redis: the token
endpoint is the test's (over TLS, through the pinned host name), the store is the product's.

Two RefreshingTokens on one record stand for two processes; a private redis-server stands for a
store that fails between a refresh and its swap.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from itertools import count
from pathlib import Path

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from ledger.store.connection import connect
from providers.oauth2.cache import RefreshingTokens
from providers.oauth2.profiles import GRAPH_SCOPES, graph_grant
from providers.oauth2.source import AccessToken
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from service.config import load_config
from service.graph_tokens import RedisRefreshTokenStore, marker_key, refresh_token_store
from service.mail_login import graph_token_store, graph_tokens
from support.angelos_process import free_port
from support.clock import Clock
from support.redis_control import ControlledRedis, controlled_redis
from support.services import Services
from support.token_endpoint import TokenEndpoint, token_endpoint

pytestmark = pytest.mark.services

TENANT = "8d2f3c1a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
CLIENT = "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"
SECRET = "graph-client-secret"
KEY = Secret(secrets.token_hex(32))
HANG_GUARD_S = 30.0  # only stops a hung test; no assertion is about time


@pytest_asyncio.fixture
async def endpoint(services: Services) -> AsyncIterator[TokenEndpoint]:
    async with token_endpoint(services.dir / "tls", services.ca_file) as server:
        server.scope = " ".join(GRAPH_SCOPES)
        numbers = count(1)
        server.returned_refresh_token = lambda: f"M.C5_BAY.rotated-{next(numbers)}"
        yield server


@pytest_asyncio.fixture
async def client(services: Services) -> AsyncIterator[aioredis.Redis]:
    redis_client = connect(services.redis_url)
    yield redis_client
    await redis_client.aclose()


@pytest.fixture
def seed() -> str:
    return "M.C5_BAY.seed-" + secrets.token_urlsafe(8)  # a record of each test's own


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[ControlledRedis]:
    with controlled_redis(tmp_path / "redis") as server:
        yield server


def store_on(client: aioredis.Redis, seed: str) -> RedisRefreshTokenStore:
    return refresh_token_store(
        client, TENANT, CLIENT, "account-1", "owner@example.test", Secret(seed), KEY
    )


def source(store: RedisRefreshTokenStore, seed: str) -> RefreshingTokens:
    grant = graph_grant(TENANT, CLIENT, Secret(SECRET), Secret(seed))
    return RefreshingTokens(grant, 5.0, clock=Clock(), rotation=store)


def sent(endpoint: TokenEndpoint) -> list[str]:
    """The refresh token of each request, in order."""
    return [seen.form["refresh_token"][0] for seen in endpoint.requests]


async def unavailable(tokens: RefreshingTokens) -> str:
    with pytest.raises(ServiceUnavailable) as caught:
        async with asyncio.timeout(HANG_GUARD_S):
            await tokens.token()
    return caught.value.message


async def stored(store: RedisRefreshTokenStore) -> str | None:
    found = await store.load()
    return None if found is None else found.refresh_token.reveal()


async def test_the_seed_starts_and_each_rotation_is_stored_and_sent_next(
    endpoint: TokenEndpoint, client: aioredis.Redis, seed: str
) -> None:
    store = store_on(client, seed)
    tokens = source(store, seed)
    first = await tokens.token()
    assert "M.C5_BAY.rotated-1" == await stored(store)
    tokens.invalidate(first.generation)
    await tokens.token()
    assert [seed, "M.C5_BAY.rotated-1"] == sent(endpoint)
    assert "M.C5_BAY.rotated-2" == await stored(store)
    # A restart (a new source and store object) starts from the stored token, not the seed.
    await source(store_on(client, seed), seed).token()
    assert "M.C5_BAY.rotated-2" == sent(endpoint)[-1]
    form = endpoint.requests[0].form
    assert (form["client_secret"], form["scope"]) == ([SECRET], [" ".join(GRAPH_SCOPES)])
    assert f"/{TENANT}/oauth2/v2.0/token" == endpoint.requests[0].path


async def test_two_processes_racing_on_one_record_end_with_one_stored_token(
    endpoint: TokenEndpoint, client: aioredis.Redis, seed: str
) -> None:
    endpoint.held = True
    first, second = source(store_on(client, seed), seed), source(store_on(client, seed), seed)
    async with asyncio.timeout(HANG_GUARD_S):
        racing = asyncio.gather(first.token(), second.token())
        while endpoint.count < 2:  # both read the empty store and sent the seed
            endpoint.arrived.clear()
            if endpoint.count < 2:
                await endpoint.arrived.wait()
        endpoint.release()
        got = await racing
    assert [seed, seed] == sent(endpoint)
    assert all(token.fresh for token in got)  # both refreshes are usable, the loser's too
    winner = await stored(store_on(client, seed))
    assert winner in ("M.C5_BAY.rotated-1", "M.C5_BAY.rotated-2")
    for tokens, token in zip((first, second), got, strict=True):
        tokens.invalidate(token.generation)
        await tokens.token()
    assert [winner, winner] == sent(endpoint)[2:]  # the loser adopted the winner's token


async def test_an_unreachable_store_is_unavailable_before_any_token_request(
    endpoint: TokenEndpoint, seed: str
) -> None:
    dead = aioredis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=2)
    try:
        tokens = source(store_on(dead, seed), seed)
        assert "(Redis) did not answer" in await unavailable(tokens)
        assert "(Redis) did not answer" in await unavailable(tokens)  # tried again, still closed
    finally:
        await dead.aclose()
    assert 0 == endpoint.count


async def test_a_malformed_store_is_unavailable_before_any_token_request(
    endpoint: TokenEndpoint, client: aioredis.Redis, seed: str
) -> None:
    store = store_on(client, seed)
    await client.set(marker_key(store.record_key), "v1")  # a marker without its record
    try:
        assert "incomplete or malformed" in await unavailable(source(store, seed))
    finally:
        await client.delete(marker_key(store.record_key))
    assert 0 == endpoint.count


async def test_a_store_that_fails_after_a_refresh_costs_no_second_request(
    endpoint: TokenEndpoint, private_redis: ControlledRedis, seed: str
) -> None:
    client = connect(private_redis.url)
    try:
        store = store_on(client, seed)
        tokens = source(store, seed)
        private_redis.oom(True)  # reads still answer; the swap's first write fails
        assert "(Redis) refused a command" in await unavailable(tokens)
        assert [seed] == sent(endpoint)  # one refresh, and no retry after the store failed
        assert "(Redis) refused a command" in await unavailable(tokens)
        assert [seed] == sent(endpoint)  # the unsaved token is offered to the store first
        private_redis.oom(False)
        token = await tokens.token()
        assert AccessToken(Secret(endpoint.minted[1]), 1, fresh=True) == token
        # The token the failed flight got was stored first, then sent; its successor is stored.
        assert [seed, "M.C5_BAY.rotated-1"] == sent(endpoint)
        assert "M.C5_BAY.rotated-2" == await stored(store)
    finally:
        await client.aclose()


async def test_graph_tokens_builds_the_source_from_the_configuration(
    endpoint: TokenEndpoint, client: aioredis.Redis, seed: str
) -> None:
    mail = load_config(
        {
            "MAIL_PROVIDER": "microsoft",
            "MAIL_USERNAME": "owner@example.test",
            "MICROSOFT_CLIENT_ID": CLIENT,
            "MICROSOFT_CLIENT_SECRET": SECRET,
            "MICROSOFT_REFRESH_TOKEN": seed,
            "MICROSOFT_TENANT_ID": TENANT,
            "MICROSOFT_ACCOUNT_ID": "account-1",
            "MICROSOFT_TOKEN_ENCRYPTION_KEY": KEY.reveal(),
            "HOME": "/nonexistent",
        }
    ).mail
    assert mail is not None
    store = graph_token_store(client, mail)
    assert store.record_key == store_on(client, seed).record_key
    tokens = graph_tokens(mail, store)
    assert tokens is graph_tokens(mail, store)  # one source per process for one store
    await tokens.token()
    assert "M.C5_BAY.rotated-1" == await stored(store)
    assert "angelos microsoft-auth" in tokens.recovery
