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
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import pct

from ledger.chain import event_hash
from ledger.ids import new_id
from ledger.store.answers import Head
from ledger.store.connection import connect
from ledger.store.durability.witness import Witness
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifecycles", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, nargs="*", default=[1, 64, 256])
    parser.add_argument(
        "--batching", choices=["on", "off", "both"], default="both",
        help="coalesce script calls of one loop turn into one pipeline (LedgerSettings.batching)",
    )  # fmt: skip
    parser.add_argument(
        "--witness", choices=["on", "off", "both"], default="off",
        help="keep the rollback witness (a fsynced file) at each commit point, as servers do",
    )  # fmt: skip
    args = parser.parse_args()
    url = os.environ.get("ANGELOS_REDIS_URL")
    if not url:
        sys.exit("ANGELOS_REDIS_URL is not set: run under scripts/test-services run --")
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
    finally:
        shutil.rmtree(witness_dir, ignore_errors=True)
        keys = [key async for key in client.scan_iter(match=f"{namespace}:*", count=1000)]
        for start in range(0, len(keys), 500):
            await client.delete(*keys[start : start + 500])
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
