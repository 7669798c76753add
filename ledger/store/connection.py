"""Redis clients for the ledger: a blocking pool and no automatic retries.

Retries are the ledger's own decision (ledger/store/retry.py), made per operation: only writes
that carry an event id may be repeated, because the scripts recognise a repeat by it.
"""

from __future__ import annotations

from typing import Any, Final

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

POOL_CONNECTIONS: Final = 100
POOL_WAIT_S: Final = 30.0


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
    return aioredis.Redis.from_pool(pool)


def connect_unix(path: str) -> aioredis.Redis:
    """Open a client for a Unix socket (the embedded store), pooled like connect()."""
    pool = aioredis.BlockingConnectionPool(
        connection_class=aioredis.UnixDomainSocketConnection,
        path=path,
        max_connections=POOL_CONNECTIONS,
        timeout=POOL_WAIT_S,
        retry=Retry(NoBackoff(), 0),
    )
    return aioredis.Redis.from_pool(pool)
