"""One connection to the node that holds a key, on one Redis or on a cluster.

The ledger writes its scripts, and reads the store's facts, straight on a connection it holds
(ledger/store/wire.py), so that a `WAIT` after a write runs on the connection that wrote it.
On a cluster that connection belongs to the primary of the key's slot; a MOVED reply or a
failed node makes the topology be read again before the next try.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from ledger.store.connection import StoreClient

# Replies after which a command provably did not run, on a cluster that is moving or electing.
NOT_RUN_HERE = (MovedError, AskError, TryAgainError, ClusterDownError)


@contextlib.asynccontextmanager
async def borrowed(client: StoreClient, key: str) -> AsyncIterator[AbstractConnection]:
    """Lend a pooled connection to the node that serves `key` (any connection on one server)."""
    if not isinstance(client, RedisCluster):
        pool = client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            yield connection
        finally:
            await pool.release(connection)
        return
    await client.initialize()  # a no-op once the topology is known
    node = client.nodes_manager.get_node_from_slot(client.keyslot(key))
    held = node.acquire_connection()
    try:
        yield held
    except Exception:
        await rediscover(client)
        raise
    finally:
        node.release(held)


async def rediscover(client: StoreClient) -> None:
    """Read a cluster's topology again (after MOVED or a failed node); nothing on one server."""
    if isinstance(client, RedisCluster):
        with contextlib.suppress(Exception):  # the next command fails clearly if it still fails
            await client.nodes_manager.initialize()


async def cluster_nodes(client: StoreClient) -> list[ClusterNode]:
    """Every node of a cluster, primaries and replicas (none for a single server)."""
    if not isinstance(client, RedisCluster):
        return []
    await client.initialize()
    return client.get_nodes()


@contextlib.asynccontextmanager
async def on_node(node: ClusterNode) -> AsyncIterator[AbstractConnection]:
    """Lend a connection to one given cluster node."""
    held = node.acquire_connection()
    try:
        yield held
    finally:
        node.release(held)
