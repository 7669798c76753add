"""The startup self-check on a real Redis Cluster: it reads every node, and it asks for WAIT
replicas when the ledger's shard has replicas a failover may promote.

Each test forms its own cluster (scripts/test-redis-cluster: 3 primaries, with `replicas` each,
every node `appendonly yes` + `appendfsync always` + `noeviction`) and always stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis

from ledger.ids import new_id
from ledger.store.connection import connect
from ledger.store.durability.selfcheck import SelfCheckOptions, self_check
from ledger.store.keys import LedgerKeys
from ledger.store.scripts import SCRIPTS
from schemas.ledger import SelfCheckReport
from support.ledger_redis import make_store
from support.redis_cluster import ControlledCluster

# Long enough that a busy machine never fails a node over by mistake during a check.
NODE_TIMEOUT_MS = 15_000
WAIT_REASON = (
    "the ledger's cluster shard has 1 replica(s) that a failover may promote: "
    "set SEND_LEDGER_WAIT_REPLICAS to at least 1"
)

Start = Callable[[int], Awaitable[ControlledCluster]]


@pytest.fixture(name="namespace")
def namespace_fixture() -> str:
    return f"cs-{new_id()[:12]}"


@pytest.fixture(name="start_cluster")
async def start_cluster_fixture(namespace: str) -> AsyncIterator[Start]:
    """Form a cluster around the ledger's meta key; every cluster formed is stopped."""
    started: list[ControlledCluster] = []

    async def start(replicas: int) -> ControlledCluster:
        cluster = ControlledCluster(
            LedgerKeys(namespace).meta, replicas=replicas, node_timeout_ms=NODE_TIMEOUT_MS
        )
        started.append(cluster)  # before start(): a half-formed cluster is stopped too
        await asyncio.to_thread(cluster.start)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            await asyncio.to_thread(cluster.stop)


async def check(cluster: ControlledCluster, namespace: str, **options: object) -> SelfCheckReport:
    client = connect(cluster.url)
    try:
        store = make_store(client, namespace)
        return await self_check(
            client,
            SelfCheckOptions(**options),  # type: ignore[arg-type]
            store=store,
        )
    finally:
        await client.aclose()


def set_config(node: str, name: str, value: str) -> None:
    host, port = node.rsplit(":", 1)
    with redis.Redis(host=host, port=int(port), socket_timeout=5) as client:
        client.config_set(name, value)


def assert_names_no_node(reason: str, cluster: ControlledCluster) -> None:
    """The reason is shown to agents: no host or port of any node."""
    assert "127.0.0.1" not in reason
    for node in cluster.nodes:
        assert node not in reason
        assert node.rsplit(":", 1)[1] not in reason


class TestEveryNode:
    async def test_a_clean_cluster_without_replicas_passes(
        self, start_cluster: Start, namespace: str
    ) -> None:
        cluster = await start_cluster(0)
        assert len(cluster.nodes) == 3
        report = await check(cluster, namespace)
        assert (report.usable, report.reason, report.durability_mode, report.waitaof) == (
            True,
            "",
            "aof_always",
            False,
        )
        assert report.durability_only is False
        assert report.version.startswith(("6.", "7.", "8."))
        # Every primary holds every ledger script: a promoted replica would too (it replicates
        # the SCRIPT LOAD), and a slot moved to any primary runs at once.
        for node in cluster.nodes:
            host, port = node.rsplit(":", 1)
            with redis.Redis(host=host, port=int(port), socket_timeout=5) as direct:
                assert all(direct.script_exists(*(SCRIPTS.sha(n) for n in SCRIPTS.names)))
        assert len(report.store_id) == 32

    async def test_one_node_with_appendfsync_everysec_makes_it_unusable(
        self, start_cluster: Start, namespace: str
    ) -> None:
        cluster = await start_cluster(0)
        ledger_node = await asyncio.to_thread(cluster.primary)
        other = next(node for node in cluster.nodes if node != ledger_node)
        await asyncio.to_thread(set_config, other, "appendfsync", "everysec")

        report = await check(cluster, namespace)

        assert report.usable is False
        assert report.durability_mode == "none"
        assert report.reason.startswith(
            "1 of 3 Redis Cluster nodes fail the durability rule ("
            "appendfsync is everysec: the ledger needs appendfsync always"
        ), report.reason
        assert_names_no_node(report.reason, cluster)

    async def test_the_node_fixed_again_passes(self, start_cluster: Start, namespace: str) -> None:
        cluster = await start_cluster(0)
        node = cluster.nodes[-1]
        await asyncio.to_thread(set_config, node, "appendfsync", "everysec")
        assert (await check(cluster, namespace)).usable is False
        await asyncio.to_thread(set_config, node, "appendfsync", "always")
        report = await check(cluster, namespace)
        assert (report.usable, report.reason) == (True, "")


class TestReplicas:
    async def test_replicas_without_wait_replicas_are_refused(
        self, start_cluster: Start, namespace: str
    ) -> None:
        cluster = await start_cluster(1)
        assert len(cluster.nodes) == 6
        report = await check(cluster, namespace)
        assert (report.usable, report.reason, report.durability_mode) == (
            False,
            WAIT_REASON,
            "none",
        )
        assert report.durability_only is False
        assert_names_no_node(report.reason, cluster)

    async def test_wait_replicas_one_passes(self, start_cluster: Start, namespace: str) -> None:
        cluster = await start_cluster(1)
        report = await check(cluster, namespace, wait_replicas=1)
        assert (report.usable, report.reason, report.durability_mode) == (
            True,
            "",
            "aof_always",
        )
        assert len(report.store_id) == 32

    async def test_wait_replicas_beyond_the_shard_are_refused(
        self, start_cluster: Start, namespace: str
    ) -> None:
        cluster = await start_cluster(1)
        report = await check(cluster, namespace, wait_replicas=2)
        assert (report.usable, report.reason, report.durability_mode) == (
            False,
            "SEND_LEDGER_WAIT_REPLICAS asks 2 replica(s); the ledger's cluster shard has 1",
            "none",
        )
        assert_names_no_node(report.reason, cluster)
