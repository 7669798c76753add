"""`angelos ledger show`: one send's timeline, its evidence and the conclusion it supports
(docs/runbook.md)."""

from __future__ import annotations

import argparse
import sys

from ledger.audit.checks import missing_stream_findings
from ledger.audit.show import render, timeline
from ledger.audit.verify import audit_pids, items_are_pid
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from service.ledger_cli.common import FINDINGS, OK, USAGE, print_json, rules_for


async def show(args: argparse.Namespace, store: LedgerStore) -> int:
    """Print one send's timeline, its evidence and the conclusion it supports."""
    pid = args.prepared_id
    if not items_are_pid(pid):
        print("angelos ledger: a prepared_id is 32 lowercase hex characters", file=sys.stderr)
        return USAGE
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    rules = await rules_for(store, now)
    found = await audit_pids(reader, [pid], rules)
    if not found:
        indexed = [item for item in await reader.index() if item.pid == pid]
        gone = missing_stream_findings(pid, indexed, rules)
        if gone:
            print(f"FINDING {pid}: the index names this send but its stream is gone (deleted?)")
        else:
            print(f"no ledger stream for {pid} (unknown, or its retention ended)", file=sys.stderr)
        return FINDINGS
    audit, entries = found[0]
    view = timeline(audit, entries)
    if args.json:
        print_json(view)
    else:
        print(render(view))
    return FINDINGS if audit.findings else OK
