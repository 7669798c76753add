"""Audit and recovery throughput against a private Redis (AOF, appendfsync always).

Not a test. It starts its own redis-server in a temporary directory, then measures:

  1. the machine's reference: `redis-benchmark` XADD requests/s against that server, this run;
  2. `verify` throughput (events/s) over a ledger of >= 1,000,000 events (chain, canonical
     form, state machine, rules, and the index cross-check);
  3. the time one recovery pass takes over 100,000 open claims of dead dispatchers;
  4. the signed archive (bench/archive.py): the ledger's append rate through the store's
     scripts without and with an archive, the archiver's rate catching up on those appends,
     and the offline `verify --archive` of an archive of 1,000,000 events.

The first figures are printed with their ratio to the XADD rate, the archiver's with its ratio
to the append rate. The ledgers are written the way
the store's scripts write them (same canonical bytes, hashes, entry IDs and index entries),
but loaded with pipelined XADDs so the load itself does not dominate the run.

    .venv/bin/python bench/audit.py [--sends 200000] [--open 100000]
        [--archive-lifecycles 20000] [--archive-sends 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archive import archive_rates, verify_figures

from ledger.audit.checks import AuditRules
from ledger.audit.verify import verify_ledger
from ledger.chain import event_hash, genesis
from ledger.dispatch.recovery import Recoverer
from ledger.ids import new_id
from ledger.store.bulk import BulkReader
from ledger.store.connection import connect
from ledger.store.keys import LedgerKeys
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger import Event, encode_event
from schemas.ledger_events import (
    Claimed,
    EventData,
    Prepared,
    SmtpAccepted,
    SmtpAttemptStarted,
    SmtpCommitPoint,
)

OWNER = "a1" * 32
DIGEST = "d4" * 32
DEAD = "c3" * 16  # a dispatcher whose lease key never exists
ATTEMPT = SmtpAttemptStarted(
    transport="smtp", endpoint="smtp.example.test:465", tls_mode="tls", auth="plain"
)
COMMIT = SmtpCommitPoint(wire_bytes=4096, raw_sha256="ab" * 32)
ACCEPTED = SmtpAccepted(stage="acknowledgement", reply_code=250, enhanced_status="2.0.0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(directory: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--appendonly", "yes",
         "--appendfsync", "always", "--save", "", "--maxmemory-policy", "noeviction",
         "--dir", directory],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(200):
        ping = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True)
        if ping.stdout.strip() == b"PONG":
            return proc
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def xadd_rate(port: int) -> float:
    """redis-benchmark's XADD requests/s (50 clients, 200,000 requests)."""
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-q", "-n", "200000", "-c", "50", "-P", "1",
         "XADD", "bench:xadd", "*", "field", "value"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found = re.findall(r"([\d.]+) requests per second", out)
    if not found:
        raise RuntimeError(f"unexpected redis-benchmark output: {out!r}")
    return float(found[-1])


def chain_of(pid: str, items: list[EventData], t0: int) -> list[tuple[int, str, str, str, str]]:
    """(seq, e, h, type, eid) for each event, chained from genesis."""
    prev = genesis(pid)
    out = []
    for seq, data in enumerate(items, start=1):
        eid = new_id()
        actor = "api:bench" if isinstance(data, Prepared) else f"dispatcher:{DEAD}"
        event = Event(
            pid=pid, seq=seq, type=data.TYPE, eid=eid, prev=prev, at_ms=t0 + seq,  # type: ignore[arg-type]
            actor=actor, data=data,
        )  # fmt: skip
        e = encode_event(event).decode("ascii")
        prev = event_hash(e.encode("ascii"))
        out.append((seq, e, prev, data.TYPE, eid))
    return out


def items_for(pid: str, t0: int, complete: bool) -> list[EventData]:
    prepared = Prepared(
        owner=OWNER, digest=DIGEST, message_id=f"<{pid}@example.test>", transport="smtp",
        action="new", created_ms=t0, expires_ms=t0 + 900_000, encoded_bytes=4096,
        recipient_count=1, attachment_sha256=(), payload_sha256="f6" * 32,
    )  # fmt: skip
    claim = Claimed(
        dispatcher_id=DEAD, claim_token=new_id(), confirmed_digest=DIGEST, append_sent=False
    )
    return [prepared, claim, ATTEMPT, COMMIT, ACCEPTED] if complete else [prepared, claim]


async def load(client, keys: LedgerKeys, sends: int, complete: bool, t0: int) -> int:  # type: ignore[no-untyped-def]
    """Write `sends` streams (5 events each when complete, else an open claim) plus index."""
    events = 0
    batch = 200
    for start in range(0, sends, batch):
        async with client.pipeline(transaction=False) as pipe:
            for _ in range(min(batch, sends - start)):
                pid = new_id()
                for seq, e, h, kind, eid in chain_of(pid, items_for(pid, t0, complete), t0):
                    srv = t0 + seq
                    pipe.xadd(keys.stream(pid), {"e": e, "h": h, "t": kind, "eid": eid,
                                                 "srv_ms": srv}, id=f"0-{seq}")  # fmt: skip
                    pipe.xadd(keys.index, {"pid": pid, "seq": seq, "t": kind, "h": h})
                    events += 1
                if not complete:
                    pipe.zadd(keys.open, {f"d:{pid}": t0 + 2})
            await pipe.execute()
    return events


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=200_000, help="complete sends (5 events)")
    parser.add_argument("--open", type=int, default=100_000, help="open claims to recover")
    parser.add_argument(
        "--archive-lifecycles", type=int, default=20_000, help="sends appended for the archiver"
    )
    parser.add_argument(
        "--archive-sends", type=int, default=200_000, help="sends (5 events) in the archive"
    )
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="angelos-bench-")
    port = free_port()
    proc = start_redis(directory, port)
    try:
        rate = xadd_rate(port)
        client = connect(f"redis://127.0.0.1:{port}/0")
        t0 = time.time_ns() // 1_000_000 - 3_600_000
        keys = LedgerKeys("bench")
        started = time.perf_counter()
        events = await load(client, keys, args.sends, True, t0)
        print(f"loaded {events:,} events in {time.perf_counter() - started:.1f} s")
        rules = AuditRules(grace_ms=900_000, as_of_ms=time.time_ns() // 1_000_000)
        reader = BulkReader(client, keys)
        summary = await verify_ledger(reader, rules)
        assert summary.ok and summary.events == events, summary.findings[:3]
        verify_rate = summary.events / summary.elapsed_s

        open_keys = LedgerKeys("benchopen")
        await load(client, open_keys, args.open, False, t0)
        store = LedgerStore(client, LedgerSettings(namespace="benchopen", recovery_grace_ms=60_000))
        started = time.perf_counter()
        report = await Recoverer(store, worker_id="bench").run_once()
        recover_s = time.perf_counter() - started
        assert report.counts() == {"classified": args.open}, report.counts()
        archive = await archive_rates(client, args.archive_lifecycles)
        await client.aclose()
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(directory, ignore_errors=True)
    claims_rate = args.open / recover_s
    print(f"redis-benchmark XADD (this run, 50 clients): {rate:,.0f} requests/s")
    print(
        f"verify: {summary.events:,} events, {summary.streams:,} streams, "
        f"{summary.index_entries:,} index entries in {summary.elapsed_s:.2f} s = "
        f"{verify_rate:,.0f} events/s ({verify_rate / rate:.2f} x XADD rate)"
    )
    print(
        f"recovery: {args.open:,} open claims classified in {recover_s:.1f} s = "
        f"{claims_rate:,.0f} claims/s ({claims_rate / rate:.3f} x XADD rate)"
    )
    print(
        f"ledger appends (the store's scripts, 64 sends in flight, 4 alternating rounds): "
        f"{archive.append_plain:,.0f} events/s without an archive, {archive.append_archived:,.0f} "
        "with one "
        f"({archive.append_archived / archive.append_plain:.2f} x)"
    )
    print(
        f"archiver: caught up {archive.events:,} events at {archive.archived:,.0f} events/s "
        f"({archive.archived / archive.append_archived:.1f} x the append rate)"
    )
    archived, seconds, signed, peak = verify_figures(args.archive_sends)
    print(
        f"verify --archive (offline, one process): {archived:,} events, {signed} signed "
        f"checkpoints in {seconds:.2f} s = {archived / seconds:,.0f} events/s (target: "
        f"1,000,000 in <= 20 s); peak RSS of this process {peak:,} MiB"
    )

if __name__ == "__main__":
    asyncio.run(main())
