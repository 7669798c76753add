"""`angelos ledger acknowledge-rollback`, and what `verify` says about a store that went back.

A rollback halt is recorded in the store when any process finds the ledger's clock behind the
highest clock it kept outside Redis (ledger/store/durability/witness.py). Sending stays off
until a person runs this command, which first quarantines every send still open (they all end
as unknown / store_rollback and are never claimed again), then clears exactly the halt it
reported. The procedure around it is in docs/runbook.md.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from ledger.audit.checks import Finding
from ledger.dispatch.recovery import Recoverer
from ledger.store.answers import ACKNOWLEDGE_COMMAND, Halt
from ledger.store.durability.witness import Witness
from ledger.store.ledger_store import LedgerStore


def attach_local_witness(store: LedgerStore, data_dir: str, store_id: str) -> None:
    """Let the CLI compare with this host's witness, when the host keeps one (read-only)."""
    store.witness = Witness.existing(data_dir, store.settings.namespace, store_id)


def when(ms: int) -> str:
    """Render Redis milliseconds as UTC seconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(halt: Halt) -> str:
    """Say what a halt records, for a person."""
    return (
        f"the ledger store went back in time: detected {when(halt.detected_ms)}; the store's "
        f"clock was {halt.store_clock}, a process had seen {halt.witness_clock}"
    )


async def rollback_findings(store: LedgerStore) -> list[Finding]:
    """Ledger-level findings for `verify`: a recorded halt, or a store behind this host."""
    found: list[Finding] = []
    halt = await store.halt()
    if halt is not None:
        found.append(Finding("", 0, "rollback_halt", (
            f"{describe(halt)}; sending is halted until `{ACKNOWLEDGE_COMMAND}`"
        )))  # fmt: skip
    witness = store.witness
    if witness is not None:
        clock = await store.meta_field("clock")
        stored = int(clock) if clock.isdigit() else 0
        if stored < witness.floor():
            found.append(Finding("", 0, "store_behind_witness", (
                f"the store's clock {stored} is behind {witness.floor()}, which this host saw: "
                "acknowledged writes were lost"
            )))  # fmt: skip
    return found


async def acknowledge_rollback(store: LedgerStore) -> int:
    """Quarantine what is open, then clear the recorded halt; 0 done, 1 a newer halt came."""
    _, halt = await store.guard()  # records a halt first if the store is behind this host
    if halt is None:
        print("no rollback is recorded: sending is not halted")
        return 0
    print(describe(halt))
    report = await Recoverer(store).run_once()
    quarantined = [d for d in report.decisions if d.action == "quarantined"]
    print(f"quarantined {len(quarantined)} open send(s) as unknown / store_rollback")
    for decision in quarantined:
        print(f"  {decision.pid} {decision.kind:<11} after {decision.last_lifecycle_type}")
    left = [d for d in report.decisions if d.action in ("fenced", "corrupt")]
    for decision in left:
        print(f"  {decision.pid} {decision.kind:<11} NOT quarantined ({decision.action})")
    if left:
        print("the halt stays: run the command again once these are settled", file=sys.stderr)
        return 1
    answer = await store.acknowledge(halt)
    if answer == "changed":
        print("a newer rollback was recorded meanwhile: run the command again", file=sys.stderr)
        return 1
    print(
        "rollback acknowledged: sending resumes at each server's next lease refresh. Check "
        "every quarantined send before any new preparation: angelos ledger list --status unknown"
    )
    return 0
