"""The store-fault rig (tests/faults/store_rig.py) on a Redis Cluster: two `angelos serve`
processes, a storm of concurrent confirms, and the primary that serves the ledger's slot killed
or paused mid-storm. Judged exactly as on one Redis: nothing is sent twice, no status
contradicts the SMTP sink's spool, every claim closes, verify is clean.

The scenarios run one after another (each on its own cluster), then each test reports one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from faults.store_faults import Outcome, gathered
from faults.store_rig import Rig, with_fault

from ledger.store.keys import LedgerKeys
from support.ledger_redis import run_aside
from support.redis_cluster import ControlledCluster
from support.services import Services

pytestmark = pytest.mark.services
BURST = 200
PAUSE_S = 20.0  # past the rig's 15 s dispatcher lease
Scenario = Callable[[Rig, ControlledCluster], Awaitable[None]]
WAIT_ONE = {"SEND_LEDGER_WAIT_REPLICAS": "1"}


async def kill_mid_burst(rig: Rig, cluster: ControlledCluster) -> None:
    """kill -9 the ledger's primary while 200 sends are in flight; its replica takes over, and
    the old node comes back as the new primary's replica."""
    killed: list[str] = []

    def kill() -> None:
        killed.append(cluster.kill_primary())

    def take_over() -> None:
        cluster.await_failover(killed[0])
        cluster.restart_down()

    async with rig.running(**WAIT_ONE):
        await with_fault(rig, kill, take_over, 0.0, sends=BURST)


async def pause_without_replicas(rig: Rig, cluster: ControlledCluster) -> None:
    """SIGSTOP the ledger's primary past the lease; no replica can take over, so the slot is
    down until it resumes, as one Redis would be."""
    async with rig.running():
        await with_fault(rig, cluster.pause_primary, cluster.resume, PAUSE_S)


async def pause_with_a_replica(rig: Rig, cluster: ControlledCluster) -> None:
    """SIGSTOP the ledger's primary past the lease; its replica takes over meanwhile, and the
    old primary, resumed, becomes the new one's replica (dropping what it never replicated)."""
    paused: list[str] = []

    def pause() -> None:
        paused.append(cluster.pause_primary())

    def resume() -> None:
        cluster.await_failover(paused[0])
        cluster.resume()
        cluster.await_replicas()

    async with rig.running(**WAIT_ONE):
        await with_fault(rig, pause, resume, PAUSE_S)


SCENARIOS: dict[str, tuple[int, Scenario]] = {  # name: (replicas per primary, scenario)
    "cluster: kill -9 the primary mid-burst of 200, replica takes over": (1, kill_mid_burst),
    "cluster: SIGSTOP the primary 20 s, no replica": (0, pause_without_replicas),
    "cluster: SIGSTOP the primary 20 s, replica takes over": (1, pause_with_a_replica),
}


async def run_one(rig: Rig, replicas: int, scenario: Scenario) -> None:
    cluster = ControlledCluster(LedgerKeys(rig.namespace).meta, replicas=replicas)
    rig.redis = cluster  # type: ignore[assignment]  # the rig starts, uses and stops it
    await scenario(rig, cluster)


async def run_all(services: Services, tmp: Path) -> dict[str, Outcome]:
    """Run every scenario at once; each one's outcome, by name."""
    rigs: dict[str, Rig] = {}
    for n, name in enumerate(SCENARIOS):
        directory = tmp / f"cluster-fault-{n}"
        directory.mkdir()
        rigs[name] = Rig(services, directory, name, proxied=False)
    # One after another: three clusters, six servers and a 200-send burst at once starved the
    # other half of a busy suite run past its store timeouts.
    runs = {name: one_by_one(run_one(rigs[name], *SCENARIOS[name])) for name in SCENARIOS}
    return await gathered(rigs, runs, "cluster store fault table")


_TURN = asyncio.Lock()


async def one_by_one(run: Awaitable[None]) -> None:
    async with _TURN:
        await run


@pytest.fixture(scope="module")
def outcomes(services: Services, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return run_aside(run_all(services, tmp_path_factory.mktemp("cluster-faults")))


class TestAFailover:
    def test_the_primary_killed_mid_burst_sends_nothing_twice_and_every_status_is_honest(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["cluster: kill -9 the primary mid-burst of 200, replica takes over"].check()

    def test_a_primary_paused_past_the_lease_while_its_replica_takes_over(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["cluster: SIGSTOP the primary 20 s, replica takes over"].check()


class TestAPauseWithoutReplicas:
    def test_a_primary_paused_past_the_lease_recovers_as_one_redis_does(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["cluster: SIGSTOP the primary 20 s, no replica"].check()
