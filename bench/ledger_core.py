"""Ledger-core throughput: complete lifecycles (prepared, claimed, smtp_attempt_started,
smtp_commit_point, smtp_accepted) against a real Redis, one process, one core of Python.

Not a test. Run it against the Redis of scripts/test-services (AOF, appendfsync always):

    scripts/test-services run -- .venv/bin/python bench/ledger_core.py [--lifecycles N]

It prints lifecycles/s and p50/p99 per append for one send at a time and for many sends in
flight on one event loop (each send's appends strictly one after another, as the dispatcher
does), with the store's batching (group commit: calls of one loop turn leave as pipelines of
ledger.store.batch.MAX_BATCH) off and on, plus the CPU seconds this process and redis-server spent
per lifecycle, the Python-side cost per append, the server's time per EVALSHA and how many AOF
rewrites (forked children competing for the same cores) ran meanwhile, so the bottleneck is
visible. Every figure is measured here; nothing is estimated.

Then (unless --no-cluster) the same workload at the largest in-flight count, side by side: on
that redis-server and on a 3-primary Redis Cluster without replicas (AOF, appendfsync always)
started by scripts/test-redis-cluster on loopback and always stopped; with one namespace, and
with three whose hash tags land on three different primaries (the sends in flight split between
them). What the cluster figures mean: a namespace's keys share one hash tag, so one namespace is
one shard and a single owner does not get faster on a cluster; separate owners spread over the
shards (the per-node share of redis CPU shows it), while this one Python process on this
machine's cores still caps the sum. A gain of "cluster, 1 namespace" is this process's, not the
shard's: redis-py's cluster node hands out a pooled connection without the checks of the single
node's BlockingConnectionPool, which shows unbatched (one borrow per call).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import pct

from ledger.chain import event_hash
from ledger.ids import new_id
from ledger.store.answers import Head
from ledger.store.connection import StoreClient, connect, is_cluster_url
from ledger.store.durability.witness import Witness
from ledger.store.keys import LedgerKeys
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger import Event, PreparedPayload, encode_event
from schemas.ledger_events import Claimed, SmtpAccepted, SmtpAttemptStarted, SmtpCommitPoint

OWNER = "a1" * 32
DIGEST = "d4" * 32
DISPATCHER = "c3" * 16
ATTEMPT = SmtpAttemptStarted(
    transport="smtp", endpoint="smtp.example.test:465", tls_mode="tls", auth="plain"
)
COMMIT = SmtpCommitPoint(wire_bytes=4096, raw_sha256="ab" * 32)
ACCEPTED = SmtpAccepted(stage="acknowledgement", reply_code=250, enhanced_status="2.0.0")
RAW = b"X" * 4096  # a 4 KiB message in the private payload


def make_payload(pid: str) -> PreparedPayload:
    now = time.time_ns() // 1_000_000
    return PreparedPayload(
        pid=pid, owner=OWNER, transport="smtp", action="new", from_="a@example.test",
        to=("b@example.test",), cc=(), bcc=(), subject="bench", text="bench", html="",
        attachments=(), message_id=f"<{pid}@example.test>", created_ms=now,
        expires_ms=now + 900_000, raw=RAW, recipients=("b@example.test",), warnings=(),
        digest=DIGEST,
    )  # fmt: skip


async def lifecycle(store: LedgerStore, latencies: list[float]) -> None:
    """One complete send's ledger work, each append awaited before the next; with a rollback
    witness attached, the commit point's clock is kept (fsynced), as a dispatch does."""
    pid = new_id()
    t0 = time.perf_counter()
    prepared = await store.prepare(make_payload(pid), actor="api:bench", eid=new_id())
    t1 = time.perf_counter()
    assert prepared.head is not None
    claim = await store.claim(
        pid, owner=OWNER, confirmed_digest=DIGEST, head=prepared.head,
        claimed=Claimed(dispatcher_id=DISPATCHER, claim_token=new_id(),
                        confirmed_digest=DIGEST, append_sent=False),
        actor=f"dispatcher:{DISPATCHER}", eid=new_id(),
    )  # fmt: skip
    t2 = time.perf_counter()
    assert claim.result == "claimed" and claim.head is not None
    latencies += [t1 - t0, t2 - t1]
    head: Head = claim.head
    for data in (ATTEMPT, COMMIT, ACCEPTED):
        t = time.perf_counter()
        outcome = await store.append(
            pid, head, data, actor=f"dispatcher:{DISPATCHER}", eid=new_id()
        )
        assert outcome.result == "appended" and outcome.head is not None
        if store.witness is not None and data is COMMIT:
            await store.witness.keep(outcome.clock)
        latencies.append(time.perf_counter() - t)
        head = outcome.head


async def run(store: LedgerStore, total: int, in_flight: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker() -> None:
        for _ in queue:
            await lifecycle(store, latencies)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return time.perf_counter() - start, latencies


def python_cost(rounds: int) -> float:
    """Seconds of pure Python per append: the store's seal (canonical encode, check) + hash."""
    event = Event(
        pid="0" * 32, seq=3, type="smtp_attempt_started", eid="1" * 32, prev="2" * 64,
        at_ms=1, actor=f"dispatcher:{DISPATCHER}", data=ATTEMPT,
    )  # fmt: skip
    start = time.perf_counter()
    for _ in range(rounds):
        event_hash(encode_event(event))
    return (time.perf_counter() - start) / rounds


def redis_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the redis-server process has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def aof_rewrites(client: Any) -> int:
    """How many AOF rewrites redis-server has run: each forks a child that competes for CPU."""
    return int((await client.info("persistence")).get("aof_rewrites", 0))


@contextlib.contextmanager
def redis_cluster() -> Iterator[tuple[list[str], list[int]]]:
    """A 3-primary Redis Cluster, no replicas, on loopback (scripts/test-redis-cluster): its
    nodes (host:port) and their redis-server pids; stopped however the block ends."""
    script = str(Path(__file__).resolve().parents[1] / "scripts" / "test-redis-cluster")
    started = subprocess.run(
        [script, "start", "--replicas", "0"], capture_output=True, text=True, timeout=120,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    values = {}
    for line in started.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        values[name] = value.strip('"')
    where = values.get("MAILTEST_CLUSTER_DIR", "")
    try:
        if started.returncode != 0 or not where:
            raise RuntimeError(f"the Redis Cluster did not form: {started.stderr[-400:]}")
        nodes = values["MAILTEST_CLUSTER_NODES"].split()
        if len(nodes) != 3 or any(not n.startswith("127.0.0.1:") for n in nodes):
            raise RuntimeError(f"expected 3 loopback primaries, got {nodes}")
        pids = [int(Path(where, n.rsplit(":", 1)[1], "redis.pid").read_text()) for n in nodes]
        yield nodes, pids
    finally:
        if where:
            subprocess.run([script, "stop", where], timeout=60, check=False)


async def spread_namespaces(client: RedisCluster, base: str, count: int) -> list[str]:
    """`count` namespaces whose hash tag (the slot of their keys) each lands on another primary,
    as CLUSTER SLOTS maps slots to nodes (the client's slot table)."""
    await client.initialize()
    chosen: dict[str, str] = {}
    for i in itertools.count():
        namespace = f"{base}-{i}"
        slot = key_slot(LedgerKeys(namespace).meta.encode())
        node = client.nodes_manager.get_node_from_slot(slot)
        chosen.setdefault(node.name, namespace)
        if len(chosen) == count:
            return list(chosen.values())
    raise AssertionError("unreachable")


async def measure(
    stores: list[LedgerStore], total: int, in_flight: int, pids: list[int]
) -> tuple[float, int, float, list[float]]:
    """`total` lifecycles split over the stores (their namespaces), `in_flight` sends in all, run
    at once on this loop: seconds, lifecycles done, CPU seconds of this process and of each
    redis-server."""
    each, share = total // len(stores), max(1, in_flight // len(stores))
    cpu0, servers0 = time.process_time(), [redis_cpu_s(pid) for pid in pids]
    start = time.perf_counter()
    await asyncio.gather(*(run(store, each, share) for store in stores))
    elapsed = time.perf_counter() - start
    servers = [redis_cpu_s(pid) - s0 for pid, s0 in zip(pids, servers0, strict=True)]
    return elapsed, each * len(stores), time.process_time() - cpu0, servers


async def drop(client: StoreClient, namespaces: list[str]) -> None:
    """Delete every key of the namespaces (all of one namespace sit in one slot)."""
    for namespace in namespaces:
        keys = [key async for key in client.scan_iter(match=f"{namespace}:*", count=1000)]
        for start in range(0, len(keys), 500):
            await client.delete(*keys[start : start + 500])


async def compare_layouts(single: StoreClient, single_pid: int, args: argparse.Namespace) -> None:
    """The side-by-side table: one redis-server and a 3-primary cluster, one and three owners,
    measured in turn for --rounds rounds (this machine is shared: the median, and the range)."""
    total, in_flight, rounds = args.lifecycles, max(args.in_flight), args.rounds
    print(
        f"\nsingle node vs 3-primary Redis Cluster (no replicas, AOF always): {total} lifecycles, "
        f"{in_flight} in flight in all, witness off, one Python process, {os.cpu_count()} cores; "
        f"lifecycles/s is the median of {rounds} rounds (layouts in turn), CPU the whole:"
    )
    with redis_cluster() as (nodes, pids):
        cluster = connect(f"redis+cluster://{nodes[0]}/0", max_connections=1024)
        assert isinstance(cluster, RedisCluster)
        base = f"bench-{new_id()[:8]}"
        single_one, single_three = [f"{base}-s"], [f"{base}-s{i}" for i in range(3)]
        try:
            spread = await spread_namespaces(cluster, base, 3)
            slots = [key_slot(LedgerKeys(ns).meta.encode()) for ns in spread]
            print(f"  cluster nodes {' '.join(nodes)}; three namespaces' slots {slots}")
            for batching in {"on": [True], "off": [False], "both": [False, True]}[args.batching]:
                layouts = {
                    "single, 1 namespace": (single, single_one, [single_pid]),
                    "single, 3 namespaces": (single, single_three, [single_pid]),
                    "cluster, 1 namespace": (cluster, [spread[0]], pids),
                    "cluster, 3 namespaces": (cluster, spread, pids),
                }
                stores = {
                    name: [LedgerStore(client, LedgerSettings(namespace=ns, batching=batching))
                           for ns in owners]
                    for name, (client, owners, _) in layouts.items()
                }  # fmt: skip
                for store in itertools.chain(*stores.values()):
                    await run(store, 50, 8)  # warm-up: scripts loaded, connections open
                rates: dict[str, list[float]] = {name: [] for name in layouts}
                cpu: dict[str, list[float]] = {}  # seconds per lifecycle, summed over rounds
                for _ in range(rounds):
                    for name, (_, _, server_pids) in layouts.items():
                        elapsed, done, mine, servers = await measure(
                            stores[name], total, in_flight, server_pids
                        )
                        rates[name].append(done / elapsed)
                        spent = [mine / done, *(x / done for x in servers)]
                        sums = cpu.get(name, [0.0] * len(spent))
                        cpu[name] = [x + y for x, y in zip(sums, spent, strict=True)]
                print(
                    f"  batching {'on' if batching else 'off'}:\n"
                    f"    {'layout':<22} {'lifecycles/s':>12} {'(range)':>11} {'ratio':>6}  "
                    f"CPU us/lifecycle: this process, redis (share per node)"
                )
                baseline = statistics.median(rates["single, 1 namespace"])
                for name, measured in rates.items():
                    rate = statistics.median(measured)
                    own, *per_node = (x / rounds * 1e6 for x in cpu[name])
                    redis_us = sum(per_node)
                    shares = " / ".join(f"{100 * x / redis_us:.0f}%" for x in per_node)
                    print(
                        f"    {name:<22} {rate:12.0f} {min(measured):5.0f}-{max(measured):<5.0f} "
                        f"{rate / baseline:5.2f}x  {own:4.0f}, {redis_us:4.0f} ({shares})"
                    )
        finally:
            await cluster.aclose()  # the cluster itself is stopped and removed whole
            await drop(single, single_one + single_three)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifecycles", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, nargs="*", default=[1, 64, 256])
    parser.add_argument(
        "--batching", choices=["on", "off", "both"], default="both",
        help="coalesce script calls of one loop turn into one pipeline (LedgerSettings.batching)",
    )  # fmt: skip
    parser.add_argument(
        "--no-cluster", action="store_true",
        help="skip the comparison with a 3-primary Redis Cluster (scripts/test-redis-cluster)",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=int, default=3,
        help="rounds of the single-node/cluster comparison (the median is printed)",
    )  # fmt: skip
    parser.add_argument(
        "--witness", choices=["on", "off", "both"], default="off",
        help="keep the rollback witness (a fsynced file) at each commit point, as servers do",
    )  # fmt: skip
    args = parser.parse_args()
    url = os.environ.get("ANGELOS_REDIS_URL")
    if not url:
        sys.exit("ANGELOS_REDIS_URL is not set: run under scripts/test-services run --")
    if is_cluster_url(url):
        sys.exit("ANGELOS_REDIS_URL names a cluster: give the single node (this starts a cluster)")
    client = connect(url, max_connections=1024)
    namespace = f"bench-{new_id()[:8]}"
    info = await client.info("server")
    server_pid = int(info.get("process_id", 0))
    fsync = (await client.config_get("appendfsync")).get("appendfsync")
    print(f"redis {info['redis_version']}, appendfsync {fsync!r}, python {sys.version.split()[0]}")
    cost = python_cost(20_000)
    print(f"python-only cost per append (seal+hash): {cost * 1e6:.1f} us")
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.batching]
    witnessing = {"on": [True], "off": [False], "both": [False, True]}[args.witness]
    witness_dir = tempfile.mkdtemp(prefix="bench-witness-")
    try:
        for batching, witness in itertools.product(modes, witnessing):
            settings = LedgerSettings(namespace=namespace, batching=batching)
            store = LedgerStore(client, settings)
            if witness:
                store.witness = Witness.open(witness_dir, namespace, new_id())
            await run(store, 50, 8)  # warm-up: scripts loaded, connections open
            print(f"batching {'on' if batching else 'off'}, witness {'on' if witness else 'off'}:")
            for in_flight in args.in_flight:
                total = args.lifecycles if in_flight > 1 else min(args.lifecycles, 1000)
                cpu0, server0 = time.process_time(), redis_cpu_s(server_pid)
                rewrites0 = await aof_rewrites(client)
                elapsed, lat = await run(store, total, in_flight)
                rewrites = await aof_rewrites(client) - rewrites0
                cpu = (time.process_time() - cpu0) / total * 1e6
                server = (redis_cpu_s(server_pid) - server0) / total * 1e6
                rate = total / elapsed
                print(
                    f"  in flight {in_flight:4d}: {total} lifecycles in {elapsed:6.2f} s = "
                    f"{rate:7.0f} lifecycles/s ({rate * 5:7.0f} appends/s); per append "
                    f"p50 {pct(lat, 0.50):7.3f} ms, p99 {pct(lat, 0.99):7.3f} ms; CPU per "
                    f"lifecycle: this process {cpu:4.0f} us ({1e6 / cpu:,.0f}/s per core), "
                    f"redis-server {server:4.0f} us ({1e6 / server:,.0f}/s per core); "
                    f"AOF rewrites meanwhile: {rewrites}"
                )
        stats = await client.info("commandstats")
        evalsha = stats.get("cmdstat_evalsha", {})
        print(f"server: EVALSHA {evalsha.get('usec_per_call', '?')} us per call (whole run)")
        if not args.no_cluster:
            await compare_layouts(client, server_pid, args)
    finally:
        shutil.rmtree(witness_dir, ignore_errors=True)
        await drop(client, [namespace])
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
