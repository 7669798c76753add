"""A Redis Cluster fails over under the ledger: a claim a replica acknowledged survives its
primary's crash and no rival claim wins; a claim the replica never acknowledged is never acted
on, and the promoted replica that lacks it is caught as a rollback.

Each test forms its own cluster (3 primaries, 1 replica each, node timeout 3 s) and kills or
pauses the primary that serves the ledger's slot.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ledger.ids import new_id
from ledger.store.answers import ClaimOutcome, Head
from ledger.store.connection import StoreClient, connect
from ledger.store.durability.acks import Acknowledgment
from ledger.store.durability.witness import Witness
from ledger.store.keys import LedgerKeys
from ledger.store.ledger_store import LedgerStore
from schemas.ledger import LedgerUnavailable
from support.ledger import DIGEST, OWNER, claimed
from support.ledger_redis import make_store, prepared_send
from support.redis_cluster import ControlledCluster

CLAIMS = 20
WAIT_ONE = Acknowledgment(replicas=1, timeout_ms=1000)


@pytest.fixture(name="namespace")
def namespace_fixture() -> str:
    return f"fo-{new_id()[:12]}"


@pytest.fixture(name="cluster")
async def cluster_fixture(namespace: str) -> AsyncIterator[ControlledCluster]:
    cluster = ControlledCluster(LedgerKeys(namespace).meta, replicas=1)
    await asyncio.to_thread(cluster.start)
    try:
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)


async def claim_once(store: LedgerStore, pid: str, head: Head, dispatcher: str) -> ClaimOutcome:
    return await store.claim(
        pid, owner=OWNER, confirmed_digest=DIGEST, head=head,
        claimed=claimed(dispatcher_id=dispatcher),
        actor=f"dispatcher:{dispatcher}", eid=new_id(),
    )  # fmt: skip


async def claim_until_answered(
    store: LedgerStore, pid: str, head: Head, dispatcher: str, within_s: float = 60
) -> ClaimOutcome:
    """A rival confirm that keeps trying through the failover until the store answers."""
    async with asyncio.timeout(within_s):
        while True:
            try:
                return await claim_once(store, pid, head, dispatcher)
            except LedgerUnavailable:
                await asyncio.sleep(0.1)


async def opened(url: str, namespace: str) -> tuple[StoreClient, LedgerStore]:
    client = connect(url)
    await client.initialize()  # like a running server: it knows every node before the fault
    store = make_store(client, namespace)
    store.require(WAIT_ONE)
    return client, store


class TestAClaimAReplicaHeld:
    async def test_survives_its_primary_killed_and_no_racing_rival_claim_wins(
        self, cluster: ControlledCluster, namespace: str
    ) -> None:
        client, store = await opened(cluster.url, namespace)
        rival_client, rival = await opened(cluster.url, namespace)
        try:
            claims: list[tuple[str, Head, Head]] = []
            for _ in range(CLAIMS):
                pid, head = await prepared_send(store)
                won = await claim_once(store, pid, head, "a1" * 16)
                assert ("claimed", True) == (won.result, won.confirmed), won
                assert won.head is not None
                claims.append((pid, head, won.head))
            old = await asyncio.to_thread(cluster.kill_primary)
            # Every rival confirm races the failover: it starts while the primary is dead.
            rivals = await asyncio.gather(*(
                claim_until_answered(rival, pid, head, "b2" * 16) for pid, head, _ in claims
            ))  # fmt: skip
            new = await asyncio.to_thread(cluster.await_failover, old)
            assert new != old
            assert ["existing"] * CLAIMS == [outcome.result for outcome in rivals]
            for pid, _, won in claims:
                _, entries = await rival.read(pid)
                assert (won.seq, won.h) == (entries[-1].seq, entries[-1].h)  # the claim survived
                assert "claimed" == entries[-1].t
        finally:
            await client.aclose()
            await rival_client.aclose()


class TestAClaimNoReplicaHeld:
    async def test_is_never_confirmed_and_its_loss_in_a_failover_halts_as_a_rollback(
        self, cluster: ControlledCluster, namespace: str, tmp_path: Path
    ) -> None:
        client, store = await opened(cluster.url, namespace)
        rival_client, rival = await opened(cluster.url, namespace)
        try:
            meta = await store.ensure_meta()
            store.witness = Witness.open(str(tmp_path), namespace, meta.store_id)
            pid, head = await prepared_send(store)
            await store.guard()  # the witness now holds the clock of the preparation
            await asyncio.to_thread(cut_replica_link, cluster)  # the replica takes nothing more
            lost = await claim_once(store, pid, head, "a1" * 16)
            # The claim landed on the primary alone: WAIT says so, and the dispatcher stops
            # before its attempt marker (ledger/dispatch/pipeline.py: not_attempted).
            assert ("claimed", False) == (lost.result, lost.confirmed), lost
            old = await asyncio.to_thread(cluster.kill_primary)
            await asyncio.to_thread(cluster.resume)
            await asyncio.to_thread(cluster.await_failover, old)
            # The promoted replica lacks the claim this host saw: a rollback, recorded for all.
            _, halt = await until_answered(store.guard)
            assert halt is not None
            refused = await claim_until_answered(rival, pid, head, "b2" * 16)
            assert "halted" == refused.result  # nothing may start until a person looks
            assert "acknowledged" == await rival.acknowledge(halt)
            store.witness.close()
            # Acknowledged, and the old primary back as the new one's replica: the preparation
            # the lost claim never left may now go, once.
            await asyncio.to_thread(cluster.restart_down)
            won = await claim_until_answered(rival, pid, head, "b2" * 16)
            assert ("claimed", True) == (won.result, won.confirmed), won
        finally:
            await client.aclose()
            await rival_client.aclose()


def cut_replica_link(cluster: ControlledCluster) -> None:
    """Pause the slot primary's replica and drop its link: whatever the primary writes next
    never reaches it (a pause alone would not do: the kernel keeps what arrives meanwhile)."""
    primary = cluster.primary()
    with cluster._client(primary) as node:
        found = node.info("replication")["slave0"]
        replica = f"{found['ip']}:{found['port']}"
        cluster._signal(replica, signal.SIGSTOP)
        cluster.paused.append(replica)
        node.execute_command("CLIENT", "KILL", "TYPE", "replica")


async def until_answered(call: object, within_s: float = 30) -> tuple[int, object]:
    async with asyncio.timeout(within_s):
        while True:
            try:
                return await call()  # type: ignore[operator,no-any-return]
            except LedgerUnavailable:
                await asyncio.sleep(0.1)
