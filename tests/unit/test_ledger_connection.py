"""The ledger's Redis clients: a blocking pool per URL scheme, and no automatic retries."""

from __future__ import annotations

import pytest
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from ledger.store.connection import connect, connect_unix


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", Connection),
        ("rediss://127.0.0.1:6380/0", SSLConnection),
        ("unix:///tmp/redis.sock", UnixDomainSocketConnection),
    ],
)
async def test_every_url_scheme_gets_its_connection_class(url: str, expected: type) -> None:
    client = connect(url)
    try:
        assert client.connection_pool.connection_class is expected
    finally:
        await client.aclose()


async def test_redis_py_never_retries_a_ledger_command_on_its_own() -> None:
    for client in (connect("redis://127.0.0.1:6379/0"), connect_unix("/tmp/no-such.sock")):
        try:
            retry = client.connection_pool.connection_kwargs["retry"]
            assert 0 == retry.get_retries()
        finally:
            await client.aclose()
