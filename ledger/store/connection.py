"""Redis clients for the ledger: a blocking pool, explicit timeouts, health checks, and no
automatic command retries.

Retries are the ledger's own decision (ledger/store/retry.py), made per operation: only writes
that carry an event id may be repeated, because the scripts recognise a repeat by it; a read is
repeated once on a fresh connection (ledger_store.py). The timeouts are explicit so that a
silent server never holds a dispatch, the lease or recovery for longer than they say, whatever
redis-py's defaults become. A connection idle for HEALTH_CHECK_S is PINGed before its next
command, so one that died quietly fails before it carries a write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Final

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

POOL_CONNECTIONS: Final = 100
POOL_WAIT_S: Final = 30.0
SOCKET_TIMEOUT_S: Final = 5.0  # any reply (WAITAOF's own timeout is added on top)
CONNECT_TIMEOUT_S: Final = 2.0
HEALTH_CHECK_S: Final = 1.0
OnConnect = Callable[[AbstractConnection], Awaitable[None]]


def client_options(
    *, on_connect: OnConnect | None = None, extra_timeout_s: float = 0.0
) -> dict[str, Any]:
    """The pool options every ledger client uses; `on_connect` reads each new connection."""
    options: dict[str, Any] = {
        "max_connections": POOL_CONNECTIONS,
        "timeout": POOL_WAIT_S,
        "retry": Retry(NoBackoff(), 0),
        "socket_timeout": SOCKET_TIMEOUT_S + extra_timeout_s,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "health_check_interval": HEALTH_CHECK_S,
    }
    if on_connect is not None:
        options["redis_connect_func"] = on_connect
    return options


def connect(
    url: str, *, on_connect: OnConnect | None = None, extra_timeout_s: float = 0.0, **options: Any
) -> aioredis.Redis:
    """Open a client for ANGELOS_REDIS_URL.

    The pool blocks when all connections are busy: a burst of concurrent confirms waits for a
    connection instead of failing with "too many connections".
    """
    settings = client_options(on_connect=on_connect, extra_timeout_s=extra_timeout_s) | options
    pool = aioredis.BlockingConnectionPool.from_url(url, **settings)
    return aioredis.Redis.from_pool(pool)


def connect_unix(path: str, *, on_connect: OnConnect | None = None) -> aioredis.Redis:
    """Open a client for a Unix socket (the embedded store), pooled like connect()."""
    pool = aioredis.BlockingConnectionPool(
        connection_class=aioredis.UnixDomainSocketConnection,
        path=path,
        **client_options(on_connect=on_connect),
    )
    return aioredis.Redis.from_pool(pool)


async def drop_idle(client: aioredis.Redis) -> None:
    """Close every idle pooled connection (after a failure, they may all be stale)."""
    with contextlib.suppress(Exception):  # closing what is already broken may fail: no matter
        await client.connection_pool.disconnect(inuse_connections=False)
