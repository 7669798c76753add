"""The ledger's Redis connections pack commands in C byte for byte as redis-py would."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from ledger.store.connection import (
    FastConnection,
    FastSSLConnection,
    FastUnixConnection,
    connect,
    connect_unix,
)

_ARG = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)


def _joined(chunks: list[bytes]) -> bytes:
    return b"".join(bytes(chunk) for chunk in chunks)


@given(st.lists(_ARG, max_size=12))
def test_packed_bytes_equal_redis_py(args: list[str | bytes | int | float]) -> None:
    fast, plain = FastConnection(), Connection()
    for command in ("EVALSHA", "SCRIPT LOAD", b"XADD"):
        assert _joined(fast.pack_command(command, *args)) == _joined(
            plain.pack_command(command, *args)
        )


def test_large_values_and_huge_integers_pack_like_redis_py() -> None:
    fast, plain = FastConnection(), Connection()
    blob = b"\x00\xff" * 40_000  # past redis-py's chunking cutoff
    for args in (("SET", "k", blob), ("SET", "k", 2**80), ("SET", "k", memoryview(blob))):
        assert _joined(fast.pack_command(*args)) == _joined(plain.pack_command(*args))


def test_a_bool_is_refused_as_redis_py_refuses_it() -> None:
    with pytest.raises(DataError):
        FastConnection().pack_command("SET", "k", True)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", FastConnection),
        ("rediss://127.0.0.1:6380/0", FastSSLConnection),
        ("unix:///tmp/redis.sock", FastUnixConnection),
    ],
)
async def test_every_url_scheme_gets_its_fast_connection_class(url: str, expected: type) -> None:
    client = connect(url)
    try:
        assert client.connection_pool.connection_class is expected
    finally:
        await client.aclose()


async def test_the_embedded_socket_client_packs_in_c() -> None:
    client = connect_unix("/tmp/no-such-angelos.sock")
    try:
        assert client.connection_pool.connection_class is FastUnixConnection
    finally:
        await client.aclose()
