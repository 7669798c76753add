"""Redis clients for the ledger: one server (a blocking pool) or a Redis Cluster (redis-py's
RedisCluster, for a `+cluster` URL), explicit timeouts, health checks, and no automatic
command retries.

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
from typing import Any, Final, TypeAlias

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

POOL_CONNECTIONS: Final = 100
POOL_WAIT_S: Final = 30.0
SOCKET_TIMEOUT_S: Final = 5.0  # any reply (WAITAOF's own timeout is added on top)
CONNECT_TIMEOUT_S: Final = 2.0
HEALTH_CHECK_S: Final = 1.0
CLUSTER_CONNECTIONS: Final = 1000  # per node: a cluster node's pool fails, it does not wait
CLUSTER_SUFFIX: Final = "+cluster"  # redis+cluster:// and rediss+cluster:// name a cluster
OnConnect = Callable[[AbstractConnection], Awaitable[None]]
StoreClient: TypeAlias = aioredis.Redis | RedisCluster
# What a store that cannot be reached raises (a cluster whose seed nodes are all gone too).
UNREACHABLE: Final = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.RedisClusterException,
    OSError,
)


def is_cluster_url(url: str) -> bool:
    """Tell whether ANGELOS_REDIS_URL names a Redis Cluster (its scheme ends in +cluster)."""
    scheme, _, _ = url.partition("://")
    return scheme.lower().endswith(CLUSTER_SUFFIX)


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
) -> StoreClient:
    """Open a client for ANGELOS_REDIS_URL: one server, or a cluster for a `+cluster` scheme.

    The pool blocks when all connections are busy: a burst of concurrent confirms waits for a
    connection instead of failing with "too many connections".
    """
    if is_cluster_url(url):
        return connect_cluster(
            url, on_connect=on_connect, extra_timeout_s=extra_timeout_s, **options
        )
    settings = client_options(on_connect=on_connect, extra_timeout_s=extra_timeout_s) | options
    pool = aioredis.BlockingConnectionPool.from_url(url, **settings)
    return aioredis.Redis.from_pool(pool)


def connect_cluster(
    url: str, *, on_connect: OnConnect | None = None, extra_timeout_s: float = 0.0, **options: Any
) -> RedisCluster:
    """Open a redis-py RedisCluster from a seed node's `redis+cluster://` URL.

    No command is retried by redis-py (the ledger decides, as on one server); a failed node
    makes the client re-read the topology before its next command.
    """
    scheme, sep, rest = url.partition("://")
    settings: dict[str, Any] = {
        "retry": Retry(NoBackoff(), 0),
        "max_connections": CLUSTER_CONNECTIONS,
        "socket_timeout": SOCKET_TIMEOUT_S + extra_timeout_s,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "health_check_interval": HEALTH_CHECK_S,
    } | options
    settings.pop("timeout", None)  # a blocking-pool option; cluster pools do not wait
    client = RedisCluster.from_url(scheme[: -len(CLUSTER_SUFFIX)] + sep + rest, **settings)
    if on_connect is not None:
        # RedisCluster takes no connect hook; every node's connections are built from these
        # kwargs (the seed node holds its own copy), so the hook reaches every new connection.
        client.connection_kwargs["redis_connect_func"] = on_connect
        for node in client.nodes_manager.startup_nodes.values():
            node.connection_kwargs["redis_connect_func"] = on_connect
    return client


def connect_unix(path: str, *, on_connect: OnConnect | None = None) -> aioredis.Redis:
    """Open a client for a Unix socket (the embedded store), pooled like connect()."""
    pool = aioredis.BlockingConnectionPool(
        connection_class=aioredis.UnixDomainSocketConnection,
        path=path,
        **client_options(on_connect=on_connect),
    )
    return aioredis.Redis.from_pool(pool)


async def ready(client: StoreClient) -> None:
    """Read a cluster's topology once, before the client is shared by concurrent callers
    (measured: 20 concurrent first commands on a fresh RedisCluster lost 13 connections with
    "Connection closed by server"); nothing for one server. An unreachable cluster is left
    for the self-check to report."""
    if isinstance(client, RedisCluster):
        with contextlib.suppress(*UNREACHABLE):
            await client.initialize()


async def drop_idle(client: StoreClient) -> None:
    """Close every idle pooled connection (after a failure, they may all be stale)."""
    with contextlib.suppress(Exception):  # closing what is already broken may fail: no matter
        if isinstance(client, RedisCluster):
            for node in client.get_nodes():
                await node.disconnect_free_connections()
        else:
            await client.connection_pool.disconnect(inuse_connections=False)
