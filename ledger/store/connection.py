"""Redis clients for the ledger: a blocking pool, no automatic retries, commands packed in C.

redis-py's asyncio connections pack every command in Python, one isinstance chain per
argument; a ledger append carries about twenty arguments, so packing cost more than the
server's work. hiredis (already the reply parser) packs the same bytes in C; anything it
refuses (a bool, an integer past 64 bits) goes through redis-py's own packer unchanged.
"""

from __future__ import annotations

from typing import Any, Final

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

POOL_CONNECTIONS: Final = 100
POOL_WAIT_S: Final = 30.0


class _CPacking(AbstractConnection):
    """Packs commands with hiredis; redis-py's packer remains the fallback."""

    def pack_command(self, *args: Any) -> list[bytes]:
        head = args[0] if args else b""
        if isinstance(head, str) and " " in head:  # "SCRIPT LOAD" is two words on the wire
            args = (*head.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:
            return super().pack_command(*args)


class FastConnection(_CPacking, Connection):
    """TCP connection packing commands in C."""


class FastSSLConnection(_CPacking, SSLConnection):
    """TLS connection packing commands in C."""


class FastUnixConnection(_CPacking, UnixDomainSocketConnection):
    """Unix-socket connection packing commands in C."""


_FAST: Final[dict[type[AbstractConnection], type[AbstractConnection]]] = {
    Connection: FastConnection,
    SSLConnection: FastSSLConnection,
    UnixDomainSocketConnection: FastUnixConnection,
}


def connect(url: str, *, max_connections: int = POOL_CONNECTIONS, **options: Any) -> aioredis.Redis:
    """Open a client for ANGELOS_REDIS_URL without redis-py's automatic command retries.

    The pool blocks when all connections are busy: a burst of concurrent confirms waits for a
    connection instead of failing with "too many connections".
    """
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=POOL_WAIT_S,
        retry=Retry(NoBackoff(), 0),
        **options,
    )
    pool.connection_class = _FAST.get(pool.connection_class, pool.connection_class)
    return aioredis.Redis.from_pool(pool)


def connect_unix(path: str) -> aioredis.Redis:
    """Open a client for a Unix socket (the embedded store), pooled like connect()."""
    pool = aioredis.BlockingConnectionPool(
        connection_class=FastUnixConnection,
        path=path,
        max_connections=POOL_CONNECTIONS,
        timeout=POOL_WAIT_S,
        retry=Retry(NoBackoff(), 0),
    )
    return aioredis.Redis.from_pool(pool)
