"""The signed archive's figures, for bench/audit.py (which prints them in the same run).

  * the ledger's append rate through the store's scripts (complete lifecycles, many in
    flight), without an archive and with one (its scripts then keep unarchived streams);
  * the archiver's sustained rate: catching up a backlog of every event just appended;
  * offline `verify --archive` of an archive of >= 1,000,000 events (segments, signed
    checkpoints, every chain, state machine, rule and status), generated here.

    .venv/bin/python bench/audit.py    (this module alone: .venv/bin/python bench/archive.py)
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.archive import checkpoint as checkpoint_format
from ledger.archive import records
from ledger.archive.archiver import Archiver, ArchiveSettings, origin_of
from ledger.archive.audit import archive_rules, audit_archive, read_archive
from ledger.archive.merkle import Frontier, leaf_hash
from ledger.archive.segments import CHECKPOINTS, SEGMENTS, checkpoint_name, segment_name
from ledger.archive.signed_note import SignerKey, generate_key, sign
from ledger.ids import new_id
from ledger.store.keys import LedgerKeys
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger import LedgerEntry

SEGMENT_RECORDS = 100_000  # records per generated segment (~40 MB, like a 64 MiB rotation)


class ArchiveRates(NamedTuple):
    """Events/s appended without and with an archive, and archived while catching up."""

    append_plain: float
    append_archived: float
    archived: float
    events: int


async def _appends(client: Any, namespace: str, lifecycles: int, in_flight: int) -> float:
    from ledger_core import run  # bench/ is this script's directory on sys.path

    store = LedgerStore(client, LedgerSettings(namespace=namespace))
    elapsed, _ = await run(store, lifecycles, in_flight)
    return lifecycles * 5 / elapsed


async def archive_rates(client: Any, lifecycles: int, in_flight: int = 64) -> ArchiveRates:
    """Measure appends without and with an archive (alternating rounds, so the server's own
    drift - AOF growth, rewrites - weighs on both alike), then the archiver's catch-up rate."""
    signer, _ = generate_key("bench")
    keys = LedgerKeys("bench-archive")
    directory = Path(tempfile.mkdtemp(prefix="angelos-bench-archive-"))
    try:
        settings = ArchiveSettings(
            root=directory, signer=signer, recovery_grace_ms=900_000, retention_ms=604_800_000
        )
        archiver = Archiver.for_client(client, keys, settings)
        await archiver.start()  # the archive exists before the appends: they keep streams
        rounds = 4
        plain: list[float] = []
        archived_mode: list[float] = []
        for _ in range(rounds):
            plain.append(await _appends(client, "bench-plain", lifecycles // rounds, in_flight))
            archived_mode.append(
                await _appends(client, "bench-archive", lifecycles // rounds, in_flight)
            )
        started = time.perf_counter()
        events = 0
        while (taken := await archiver.run_once()) > 0:
            events += taken
        await archiver.checkpoint()
        rate = events / (time.perf_counter() - started)
        await archiver.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return ArchiveRates(
        sum(plain) / rounds, sum(archived_mode) / rounds, rate, events
    )


def write_archive(directory: Path, sends: int, signer: SignerKey) -> int:
    """Write an archive of `sends` complete sends (5 events each) as the archiver would."""
    from audit import chain_of, items_for  # bench/audit.py's realistic events

    (directory / SEGMENTS).mkdir(parents=True)
    (directory / CHECKPOINTS).mkdir()
    t0 = time.time_ns() // 1_000_000 - 3_600_000
    frontier = Frontier()
    origin = origin_of("bench", "b0" * 16)
    lines: list[bytes] = []
    first = 0

    def close_segment() -> None:
        nonlocal first, lines
        (directory / SEGMENTS / segment_name(first)).write_bytes(b"\n".join(lines) + b"\n")
        size = frontier.size
        body = checkpoint_format.render(checkpoint_format.Checkpoint(origin, size, frontier.root()))
        (directory / CHECKPOINTS / checkpoint_name(size)).write_bytes(sign(body, signer))
        first, lines = size, []

    def add(record: records.Record) -> None:
        line = records.encode(record)
        lines.append(line)
        frontier.append(leaf_hash(line))
        if len(lines) >= SEGMENT_RECORDS:
            close_segment()

    def rules() -> records.RulesRecord:
        return records.RulesRecord(
            n=frontier.size, namespace="bench", store_id="b0" * 16, retention_ms=604_800_000,
            recovery_grace_ms=900_000, archived_ms=t0,
        )  # fmt: skip

    add(rules())
    events = 0
    for number in range(sends):
        pid = new_id()
        for seq, e, h, kind, eid in chain_of(pid, items_for(pid, t0, True), t0):
            entry = LedgerEntry(pid=pid, id=f"0-{seq}", e=e, h=h, t=kind, eid=eid,
                                srv_ms=t0 + seq)  # fmt: skip
            add(records.event_record(frontier.size, f"{t0 + number}-{seq}", entry, h))
            events += 1
        if not lines:
            add(rules())  # every segment starts with the rules, as the archiver writes them
    if lines:
        close_segment()
    return events


def verify_figures(sends: int) -> tuple[int, float, int, int]:
    """Generate an archive of `sends` sends, then time the offline verify of all of it; also
    return this process's peak RSS in MiB (the verify holds the whole archive)."""
    signer, verifier = generate_key("bench")
    directory = Path(tempfile.mkdtemp(prefix="angelos-bench-verify-")) / "archive"
    try:
        started = time.perf_counter()
        events = write_archive(directory, sends, signer)
        print(f"archive of {events:,} events written in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        found = read_archive(directory, verifier)
        rules = archive_rules(found, None, time.time_ns() // 10**6, 300_000)
        summary = audit_archive(found, rules)
        seconds = time.perf_counter() - started
        assert summary.ok and summary.events == events, summary.findings[:3]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        return events, seconds, len(found.checkpoints), peak
    finally:
        shutil.rmtree(directory.parent, ignore_errors=True)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    total, seconds, signed, peak = verify_figures(count)
    print(f"verify --archive: {total:,} events, {signed} checkpoints in {seconds:.2f} s "
          f"= {total / seconds:,.0f} events/s; peak RSS {peak:,} MiB")  # fmt: skip
