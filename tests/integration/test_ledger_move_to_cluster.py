"""A ledger written on one Redis, copied to a Redis Cluster as docs/deployment.md says
(`redis-cli --cluster import`), verifies there as it did before: the key names are the same
on both, so nothing is re-keyed, and the moved meta keeps the store id the witness is bound to.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from ledger.ids import new_id
from ledger.store.connection import connect
from ledger.store.keys import LedgerKeys
from support.ledger import ACCEPTED, ATTEMPT, COMMIT
from support.ledger_cli import as_json, run_ledger
from support.ledger_redis import advance, claimed_send, make_store, prepared_send
from support.redis_cluster import ControlledCluster
from support.redis_control import ControlledRedis
from support.services import Services

pytestmark = pytest.mark.services
SENT = 3
WAITING = 2


async def test_a_single_redis_ledger_copied_to_a_cluster_verifies_the_same(
    services: Services, tmp_path: Path
) -> None:
    namespace = f"mv-{new_id()[:12]}"
    single = ControlledRedis(tmp_path / "single")
    await asyncio.to_thread(single.start)
    cluster = ControlledCluster(LedgerKeys(namespace).meta, replicas=0)
    try:
        client = connect(single.url)
        store = make_store(client, namespace)
        before_meta = await store.ensure_meta()
        heads = {}
        for _ in range(SENT):
            pid, head = await claimed_send(store)
            heads[pid] = await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        for _ in range(WAITING):
            pid, head = await prepared_send(store)
            heads[pid] = head
        await client.aclose()
        before = as_json(run_ledger(services, namespace, "verify", "--json",
                                    ANGELOS_REDIS_URL=single.url))  # fmt: skip
        assert before["ok"] and SENT + WAITING == before["streams"], before

        await asyncio.to_thread(cluster.start)
        copied = await asyncio.to_thread(
            subprocess.run,
            ["redis-cli", "--cluster", "import", cluster.nodes[0],
             "--cluster-from", f"127.0.0.1:{single.port}", "--cluster-copy"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert 0 == copied.returncode, copied.stdout[-500:] + copied.stderr[-500:]

        done = run_ledger(services, namespace, "verify", "--json", ANGELOS_REDIS_URL=cluster.url)
        after = as_json(done)
        assert 0 == done.returncode, done.stderr
        for field in ("ok", "streams", "events", "index_entries"):
            assert before[field] == after[field], (field, before, after)

        moved = connect(cluster.url)
        try:
            store = make_store(moved, namespace)
            assert before_meta.store_id == (await store.ensure_meta()).store_id
            for pid, head in heads.items():
                _, entries = await store.read(pid)
                assert (head.seq, head.h) == (entries[-1].seq, entries[-1].h)
        finally:
            await moved.aclose()
    finally:
        await asyncio.to_thread(cluster.stop)
        await asyncio.to_thread(single.stop)
