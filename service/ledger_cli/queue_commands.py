"""`angelos ledger list` and `recover`: the incident queue and what recovery will decide
(docs/runbook.md)."""

from __future__ import annotations

import argparse
import sys

from ledger.audit.verify import audit_pids, recent_pids
from ledger.dispatch.decisions import RecoveryReport
from ledger.dispatch.recovery import Recoverer
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from service.ledger_cli.common import (
    FINDINGS,
    OK,
    Progress,
    parse_when,
    print_json,
    rules_for,
)
from service.ledger_cli.rollback import describe


async def list_sends(args: argparse.Namespace, store: LedgerStore) -> int:
    """List the sends of one public status (the incident queue)."""
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    since = parse_when(args.since, now) if args.since else 0
    pids = await recent_pids(reader, since)
    rules = await rules_for(store, now)
    found = [audit for audit, _ in await audit_pids(reader, pids, rules)]
    chosen = sorted(
        (audit for audit in found if audit.status == args.status), key=lambda a: a.last_srv_ms
    )
    if args.json:
        print_json(
            [
                {
                    "prepared_id": a.pid,
                    "status": a.status,
                    "stage": a.stage,
                    "recovered": a.recovered,
                    "late_outcome_observed": a.late_outcome,
                    "last_event_ms": a.last_srv_ms,
                    "investigate": a.investigate,
                    "resolution": a.resolution,
                }
                for a in chosen
            ]
        )
        return OK
    for audit in chosen:
        stage = audit.stage or "-"
        flags = ",".join(
            flag
            for flag, on in (("recovered", audit.recovered), ("late", audit.late_outcome))
            if on
        )
        age_s = (now - audit.last_srv_ms) // 1000
        note = f"  {audit.investigate}" if audit.investigate else ""
        resolved = f"  resolved: {audit.resolution}" if audit.resolution else ""
        print(
            f"{audit.pid}  {audit.status:<9} {stage:<21} {age_s:>8}s ago  {flags or '-'}"
            f"{note}{resolved}"
        )
    print(f"{len(chosen)} send(s) with status {args.status}", file=sys.stderr)
    return OK


async def recover(args: argparse.Namespace, store: LedgerStore) -> int:
    """Run one recovery pass (or, with --dry-run, say what it would decide)."""
    recoverer = Recoverer(store)
    progress = Progress("recover", quiet=args.quiet)
    report = await recoverer.run_once(dry_run=args.dry_run, progress=lambda n: progress(n, 0))
    progress.done()
    if args.json:
        print_json(
            {"dry_run": report.dry_run, "server_ms": report.server_ms,
             "grace_ms": report.grace_ms, "counts": report.counts(),
             "decisions": report.decisions}
        )  # fmt: skip
    else:
        _print_recovery(report)
    return FINDINGS if any(d.action == "corrupt" for d in report.decisions) else OK


def _print_recovery(report: RecoveryReport) -> None:
    if report.halt is not None:
        print(f"{describe(report.halt)}: open sends are quarantined, not classified")
    mode = "dry run: nothing written" if report.dry_run else "recovery pass"
    counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts().items())) or "nothing to do"
    print(f"{mode} (grace {report.grace_ms // 1000} s): {counts}")
    for decision in report.decisions:
        verdict = f" -> {decision.verdict}" if decision.verdict else ""
        last = f" after {decision.last_lifecycle_type}" if decision.last_lifecycle_type else ""
        print(f"  {decision.pid} {decision.kind:<8} {decision.action}{last}{verdict}")
