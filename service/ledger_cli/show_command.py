"""`angelos ledger show`: one send's timeline, its evidence and the conclusion it supports
(docs/runbook.md); with `--report FILE.md`, the same as a one-page ticket."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ledger.archive.proofs import SendInclusion, render_inclusion, send_inclusion
from ledger.archive.segments import ArchiveDamaged
from ledger.archive.signed_note import SignerKey, VerifierKey
from ledger.audit.checks import missing_stream_findings
from ledger.audit.evidence import LeaseCheck, lease_holder
from ledger.audit.show import lifecycle_of, render, timeline
from ledger.audit.ticket import ticket
from ledger.audit.verify import audit_pids, items_are_pid
from ledger.store.bulk import BulkReader
from ledger.store.connection import UNREACHABLE
from ledger.store.ledger_store import LedgerStore
from schemas.ledger import LedgerEntry, LedgerUnavailable
from service.ledger_cli.common import (
    FINDINGS,
    OK,
    USAGE,
    print_json,
    public_key_of,
    rules_for,
)


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
    view = timeline(audit, entries, await lease_check(store, entries, now))
    report: Path | None = args.report
    if report is not None:
        written = await asyncio.to_thread(_write_report, report, ticket(view))
        if isinstance(written, OSError):
            print(f"angelos ledger: cannot write {report}: {written.strerror}", file=sys.stderr)
            return USAGE
        # Standard output stays one JSON document with --json.
        where = sys.stderr if args.json else sys.stdout
        print(f"report on {pid} written to {written}", file=where)
    try:
        inclusion = await archived_proofs(args, store, pid)
    except (OSError, ValueError, ArchiveDamaged) as exc:
        print(f"angelos ledger: the archive: {exc}", file=sys.stderr)
        return USAGE
    if args.json:
        print_json(view if inclusion is None else {
            **msgspec.to_builtins(view), "inclusion": msgspec.to_builtins(inclusion)
        })  # fmt: skip
    elif report is None:
        print(render(view))
        if inclusion is not None:
            print(render_inclusion(inclusion))
    return FINDINGS if audit.findings else OK


async def archived_proofs(
    args: argparse.Namespace, store: LedgerStore, pid: str
) -> SendInclusion | None:
    """The send's inclusion proofs when an archive is configured or given (None otherwise)."""
    config = args.store_config
    where = args.archive or (None if config.archive_dir is None else Path(config.archive_dir))
    if where is None:
        return None
    key: VerifierKey | None = None
    if args.public_key:
        key = public_key_of(args.public_key)
    elif config.audit_signing_key is not None:
        key = SignerKey.parse(config.audit_signing_key.reveal()).verifier()
    return await asyncio.to_thread(send_inclusion, where, pid, key)


async def lease_check(
    store: LedgerStore, entries: Sequence[LedgerEntry], now_ms: int
) -> LeaseCheck | None:
    """Read the claiming process's lease of a send still open (None when it is settled)."""
    lifecycle = lifecycle_of(entries)
    holder = None if lifecycle is None else lease_holder(lifecycle)
    if holder is None:
        return None
    try:
        left = int(await store.client.pttl(store.keys.lease(holder)))
    except UNREACHABLE:
        raise LedgerUnavailable(maybe_applied=False) from None
    # PTTL: -2 when the key is gone, -1 when it has no expiry, else the milliseconds left.
    return LeaseCheck(
        alive=left != -2,
        expires_in_ms=left if left >= 0 else None,
        configured_grace_ms=store.settings.recovery_grace_ms,
        now_ms=now_ms,
    )


def _write_report(path: Path, text: str) -> Path | OSError:
    """Write the report; return where it went, or the error that stopped it."""
    try:
        path.write_text(text, encoding="utf-8")
        return path.resolve()
    except OSError as exc:
        return exc
