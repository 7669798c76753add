"""The auditor's per-stream check alone: `audit_stream` events/s over a realistic mix, no Redis.

Not a test. It builds N sends with real canonical events, hashes and MACs (most complete with a
Sent copy, 7 events; some rejected, unknown, expired, recovered or queued), then times
`ledger.audit.checks.audit_stream` over every stream, with the HMAC key and without it (the
same sends unsealed). This is the part of an offline verify that is neither reading the files
nor hashing them into a Merkle tree.

With `--against REV` the same sends are also timed with the code of git revision REV (its tree
unpacked into a temporary directory), in alternating rounds, and the verdicts of both must be
byte-identical, so the figures compare like with like. Times are this process's CPU time
(the host is shared: wall time mostly measures the neighbours), best of `--rounds` passes:

    .venv/bin/python bench/audit_fold.py [--sends 20000] [--rounds 3] [--against HEAD~1]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
# A worker runs with the tree it times as its working directory; bench/ itself holds a
# ledger.py, so the tree goes in front of the script's own directory.
sys.path.insert(0, os.getcwd() if "--worker" in sys.argv else str(ROOT))

T0 = 1_800_000_000_000
TTL_MS = 900_000
OWNERS = tuple(f"{n:02x}" * 32 for n in range(0xA0, 0xA8))  # a few mailboxes
DISPATCHER = "c3" * 16
KEY = bytes(range(32))
# (share of sends, shape); the shapes are named in the dataset builder below.
MIX = (
    (0.80, "filed"),
    (0.04, "queued_filed"),
    (0.06, "rejected"),
    (0.03, "unknown"),
    (0.05, "expired"),
    (0.02, "recovered"),
)


def build(sends: int, seed: int) -> tuple[list[list[dict[str, object]]], int]:
    """Build `sends` streams as plain entry dicts (with `m`), and their event count."""
    from ledger.chain import event_hash, event_mac, genesis
    from schemas.ledger import Event, encode_event
    from schemas.ledger_events import (
        Claimed,
        DispatchQueued,
        EventData,
        Expired,
        Prepared,
        RecoveryClassified,
        SentFilingStarted,
        SentFilingSucceeded,
        SmtpAccepted,
        SmtpAttemptStarted,
        SmtpCommitPoint,
        SmtpOutcomeUnknown,
        SmtpRejected,
    )

    rng = random.Random(seed)
    attempt = SmtpAttemptStarted(
        transport="smtp", endpoint="smtp.example.test:465", tls_mode="tls", auth="plain"
    )
    accepted = SmtpAccepted(stage="acknowledgement", reply_code=250, enhanced_status="2.0.0")
    filing = SentFilingStarted(mailbox_role="sent")
    rejected = SmtpRejected(
        stage="envelope", reply_code=550, enhanced_status="5.1.1", network_contacted=True,
        reason="recipient_refused",
    )  # fmt: skip
    unknown = SmtpOutcomeUnknown(stage="acknowledgement", cause="connection_lost")
    queued = DispatchQueued(connections=4, ahead=2)
    streams: list[list[dict[str, object]]] = []
    events = 0
    shapes = [shape for _, shape in MIX]
    weights = [share for share, _ in MIX]
    for _ in range(sends):
        pid = f"{rng.getrandbits(128):032x}"
        start = T0 + rng.randrange(0, 86_400_000)
        digest = f"{rng.getrandbits(256):064x}"
        prepared = Prepared(
            owner=rng.choice(OWNERS), digest=digest, message_id=f"<{pid}@example.test>",
            transport="smtp", action="new", created_ms=start, expires_ms=start + TTL_MS,
            encoded_bytes=4096, recipient_count=2, attachment_sha256=(),
            payload_sha256=f"{rng.getrandbits(256):064x}",
        )  # fmt: skip
        claim = Claimed(
            dispatcher_id=DISPATCHER, claim_token=f"{rng.getrandbits(128):032x}",
            confirmed_digest=digest, append_sent=True, dispatch_deadline_ms=600_000,
            recovery_grace_ms=900_000,
        )  # fmt: skip
        # What differs from send to send in a real ledger: the message, its Sent UID, timings.
        commit = SmtpCommitPoint(
            wire_bytes=rng.randrange(2_000, 200_000), raw_sha256=f"{rng.getrandbits(256):064x}"
        )
        filed = SentFilingSucceeded(destination_known=True, uid_validity=7, uid=len(streams) + 1)
        recovered = RecoveryClassified(
            classification="not_submitted", stage="interrupted",
            claim_age_ms=rng.randrange(1_000_000, 2_000_000),  # past the 900 s grace
            last_lifecycle_type="smtp_attempt_started",
        )  # fmt: skip
        shape = rng.choices(shapes, weights)[0]
        steps: list[tuple[EventData, int, str]]  # data, ms after the start, actor
        dispatcher = f"dispatcher:{DISPATCHER}"
        opening = [(prepared, 0, "api:bench"), (claim, 5_000, dispatcher)]
        sent = [(attempt, 5_010, dispatcher), (commit, 5_400, dispatcher)]
        if shape in ("filed", "queued_filed"):
            steps = [*opening, *sent, (accepted, 5_600, dispatcher),
                     (filing, 5_610, dispatcher), (filed, 5_700, dispatcher)]  # fmt: skip
            if shape == "queued_filed":
                steps.insert(2, (queued, 5_001, dispatcher))
        elif shape == "rejected":
            steps = [*opening, (attempt, 5_010, dispatcher), (rejected, 5_200, dispatcher)]
        elif shape == "unknown":
            steps = [*opening, *sent, (unknown, 65_400, dispatcher)]
        elif shape == "expired":
            expired = Expired(reason="deadline_passed")
            steps = [(prepared, 0, "api:bench"), (expired, TTL_MS + 30_000, "sweeper:bench")]
        else:
            steps = [*opening, (attempt, 5_010, dispatcher),
                     (recovered, 5_000 + recovered.claim_age_ms, "recovery:bench")]  # fmt: skip
        prev = genesis(pid)
        srv_ms = 0
        stream: list[dict[str, object]] = []
        for seq, (data, offset, actor) in enumerate(steps, start=1):
            eid = f"{rng.getrandbits(128):032x}"
            event = Event(
                pid=pid, seq=seq, type=data.TYPE, eid=eid, prev=prev,  # type: ignore[arg-type]
                at_ms=start + offset, actor=actor, data=data,
            )  # fmt: skip
            e = encode_event(event)
            prev = event_hash(e)
            srv_ms = max(srv_ms, start + offset + rng.randrange(0, 3))  # never decreasing
            stream.append({
                "pid": pid, "id": f"0-{seq}", "e": e.decode("ascii"), "h": prev, "t": data.TYPE,
                "eid": eid, "srv_ms": srv_ms, "m": event_mac(KEY, prev),
            })  # fmt: skip
        streams.append(stream)
        events += len(stream)
    return streams, events


def work(data_path: str, rounds: int) -> dict[str, object]:
    """Time audit_stream over the sends in `data_path` with the code on sys.path; one result."""
    from ledger.audit import checks
    from ledger.audit.checks import AuditRules, audit_stream
    from schemas.ledger import LedgerEntry

    assert checks.__file__.startswith(os.getcwd()), checks.__file__  # the tree being timed
    streams = msgspec.msgpack.decode(Path(data_path).read_bytes(), type=list[list[LedgerEntry]])
    unsealed = [[msgspec.structs.replace(e, m=msgspec.UNSET) for e in s] for s in streams]
    events = sum(len(s) for s in streams)
    as_of = T0 + 2 * 86_400_000
    cases = {
        "key": (streams, AuditRules(key=KEY, as_of_ms=as_of)),
        "no key": (unsealed, AuditRules(as_of_ms=as_of)),
    }
    result: dict[str, object] = {"events": events}
    for name, (data, rules) in cases.items():
        best = float("inf")
        verdicts = b""
        for _ in range(rounds):
            gc.collect()
            started = time.process_time()
            audits = [audit_stream(s[0].pid, s, rules) for s in data]
            best = min(best, time.process_time() - started)
            verdicts = msgspec.json.encode(audits)
        flagged = [a for a in audits if a.findings or a.status == "corrupt"]
        assert not flagged, flagged[:2]
        result[name] = events / best
        result[name + " verdicts"] = hashlib.sha256(verdicts).hexdigest()
    return result


def tree_of(rev: str, into: str) -> str:
    """Unpack git revision `rev`'s Python packages into `into`; return that directory."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "ledger", "schemas", "service", "providers"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_worker(code_root: str, data_path: str, rounds: int) -> dict[str, object]:
    """Run this script's worker under `code_root` in a fresh interpreter; its result."""
    out = subprocess.run(
        [sys.executable, __file__, "--worker", data_path, "--rounds", str(rounds)],
        stdout=subprocess.PIPE, text=True, check=True, cwd=code_root,
    ).stdout  # fmt: skip
    result: dict[str, object] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="timed passes per worker (best)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating worker runs per tree")
    parser.add_argument("--against", help="a git revision to time beside the working tree")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(work(args.worker, args.rounds)))
        return
    started = time.perf_counter()
    streams, events = build(args.sends, args.seed)
    print(f"built {args.sends:,} sends, {events:,} events in {time.perf_counter() - started:.1f} s")
    with tempfile.TemporaryDirectory(prefix="angelos-audit-fold-") as tmp:
        data_path = os.path.join(tmp, "sends.msgpack")
        Path(data_path).write_bytes(msgspec.msgpack.encode(streams))
        trees = {"working tree": str(ROOT)}
        if args.against:
            trees = {args.against: tree_of(args.against, os.path.join(tmp, "rev")), **trees}
        figures: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, root in trees.items():
                figures[name].append(run_worker(root, data_path, args.rounds))
    verdicts = {(str(r["key verdicts"]), str(r["no key verdicts"])) for f in figures.values()
                for r in f}  # fmt: skip
    for name, results in figures.items():
        for case in ("key", "no key"):
            rates = sorted(float(str(r[case])) for r in results)
            print(
                f"{name:>14}, {case:>6}: {rates[0]:>9,.0f}-{rates[-1]:>9,.0f} events/s "
                f"(best of {args.rounds} passes, {len(rates)} runs)"
            )
    print("verdicts identical across trees" if len(verdicts) == 1 else "VERDICTS DIFFER")
    if len(verdicts) != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
