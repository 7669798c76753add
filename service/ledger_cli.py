"""`angelos ledger …`: the auditor's and incident responder's commands (docs/auditing.md).

Every command reads the same environment as `angelos serve` (ANGELOS_REDIS_URL, namespace,
HMAC key, grace, retention), completed from `--env-file PATH` or ANGELOS_ENV_FILE like serve's;
a refused env file stops every command, since the rest might name another store. All of them
only read, except `recover`, which runs one recovery pass (the same code as the servers'
background task; `--dry-run` writes nothing) and `acknowledge-rollback`, which a person runs
after the store went back in time (service/rollback_cli.py). Text output is for people; `--json`
is for machines. Exit status: 0 clean, 1 findings, 2 usage or configuration, 3 store unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import msgspec

from ledger.audit.checks import AuditRules, LedgerAudit, missing_stream_findings
from ledger.audit.export import export_lines, read_export, replay_export
from ledger.audit.show import render, timeline
from ledger.audit.verify import audit_pids, items_are_pid, recent_pids, verify_ledger
from ledger.chain import DEFAULT_SKEW_MS, mac_key
from ledger.dispatch.decisions import RecoveryReport
from ledger.dispatch.recovery import Recoverer
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError
from schemas.ledger import LedgerUnavailable
from service.config import Config, StoreConfig
from service.rollback_cli import (
    acknowledge_rollback,
    attach_local_witness,
    describe,
    rollback_findings,
)
from service.sending import open_store

ENV_FILE_HELP = "also read NAME=value settings from this file (the environment wins)"
STATUSES = ("prepared", "sending", "accepted", "rejected", "unknown", "expired", "corrupt")
OK, FINDINGS, USAGE, UNREACHABLE = 0, 1, 2, 3
_RELATIVE = re.compile(r"(\d+)([smhd])", re.ASCII)
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def add_ledger_commands(parser: argparse.ArgumentParser) -> None:
    """Add the `ledger` subcommands to the `angelos ledger` parser."""
    sub = parser.add_subparsers(dest="ledger_command", required=True)
    verify = sub.add_parser("verify", help="verify every stream, the index and the rules")
    verify.add_argument("--skew-ms", type=int, default=DEFAULT_SKEW_MS)
    show = sub.add_parser("show", help="the timeline of one send and what it proves")
    show.add_argument("prepared_id")
    listing = sub.add_parser("list", help="sends by public status (the incident queue)")
    listing.add_argument("--status", choices=STATUSES, required=True)
    listing.add_argument("--since", help="ms since epoch, ISO 8601 UTC, or an age like 2h / 7d")
    export = sub.add_parser("export", help="JSON Lines of raw entries for offline replay")
    export.add_argument("--since", help="ms since epoch, ISO 8601 UTC, or an age like 2h / 7d")
    export.add_argument("--until", help="ms since epoch or ISO 8601 UTC")
    export.add_argument("--pid", help="export one stream only")
    export.add_argument("--output", type=Path, help="write here instead of standard output")
    replay = sub.add_parser("replay", help="verify and project an export file without Redis")
    replay.add_argument("file", type=Path)
    replay.add_argument("--as-of", help="project as of this time (default: now)")
    replay.add_argument("--skew-ms", type=int, default=DEFAULT_SKEW_MS)
    recover = sub.add_parser("recover", help="run one recovery pass (never resends)")
    recover.add_argument("--dry-run", action="store_true", help="decide, but write nothing")
    acknowledge = sub.add_parser(
        "acknowledge-rollback",
        help="after the store went back in time: quarantine what is open, let sending resume",
    )
    for command in (verify, show, listing, export, replay, recover):
        command.add_argument("--json", action="store_true", help="machine-readable output")
        command.add_argument("--quiet", action="store_true", help="no progress on stderr")
    for command in (verify, show, listing, export, replay, recover, acknowledge):
        command.add_argument("--env-file", metavar="PATH", help=ENV_FILE_HELP)


def run_ledger(args: argparse.Namespace, config: Config) -> int:
    """Run one `angelos ledger` command; returns the exit status."""
    if config.env_file is not None and config.env_file.problems:  # the wrong store, perhaps
        for line in config.env_file.problems:
            print(f"angelos ledger: {line}", file=sys.stderr)
        return USAGE
    store_config = config.store
    if store_config is None:  # a wrong HMAC key or grace would make every verdict wrong
        for line in config.store_problems:
            print(f"angelos ledger: {line}", file=sys.stderr)
        return USAGE
    if args.ledger_command == "replay":
        return replay_file(args, store_config)
    if store_config.mode == "off":
        print("angelos ledger: ANGELOS_REDIS_URL=off: no ledger store to read", file=sys.stderr)
        return USAGE
    commands: dict[str, Callable[[argparse.Namespace, LedgerStore], Awaitable[int]]] = {
        "verify": _verify,
        "show": _show,
        "list": _list,
        "export": _export,
        "recover": _recover,
        "acknowledge-rollback": _acknowledge,
    }
    command = commands[args.ledger_command]
    return asyncio.run(_with_store(store_config, lambda store: command(args, store)))


async def _with_store(
    store_config: StoreConfig, body: Callable[[LedgerStore], Awaitable[int]]
) -> int:
    try:
        store, embedded = await open_store(store_config)
    except MailError as exc:
        print(f"angelos ledger: {exc}", file=sys.stderr)
        return UNREACHABLE
    except Exception as exc:  # the embedded store failed to start, or similar
        print(
            f"angelos ledger: the ledger store did not open: {type(exc).__name__}", file=sys.stderr
        )
        return UNREACHABLE
    try:
        attach_local_witness(store, store_config.data_dir, await store.meta_field("store_id"))
        return await body(store)
    except LedgerUnavailable:
        print("angelos ledger: the ledger store did not answer", file=sys.stderr)
        return UNREACHABLE
    finally:
        await store.client.aclose()
        if embedded is not None:
            await embedded.stop()


def rules_for(store: LedgerStore, now_ms: int, skew_ms: int = DEFAULT_SKEW_MS) -> AuditRules:
    """The audit rules from the same settings the servers use."""
    settings = store.settings
    key = None if settings.hmac_key is None else mac_key(settings.hmac_key.reveal())
    return AuditRules(
        key=key,
        skew_ms=skew_ms,
        grace_ms=settings.recovery_grace_ms,
        retention_ms=settings.retention_ms,
        as_of_ms=now_ms,
    )


# ------------------------------------------------------------------------------ commands


async def _verify(args: argparse.Namespace, store: LedgerStore) -> int:
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    meta = await store.client.hget(store.keys.meta, "mac_key_id")
    key_id = meta.decode("ascii", "replace") if isinstance(meta, bytes) else ""
    progress = _Progress("verify", quiet=args.quiet)
    summary = await verify_ledger(
        reader, rules_for(store, now, args.skew_ms), meta_key_id=key_id, progress=progress
    )
    summary.findings += await rollback_findings(store)
    progress.done()
    if args.json:
        _print_json(_summary_json(summary))
    else:
        _print_summary(summary, sys.stdout)
    return OK if summary.ok else FINDINGS


async def _show(args: argparse.Namespace, store: LedgerStore) -> int:
    pid = args.prepared_id
    if not items_are_pid(pid):
        print("angelos ledger: a prepared_id is 32 lowercase hex characters", file=sys.stderr)
        return USAGE
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    rules = rules_for(store, now)
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
        _print_json(view)
    else:
        print(render(view))
    return FINDINGS if audit.findings else OK


async def _list(args: argparse.Namespace, store: LedgerStore) -> int:
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    since = parse_when(args.since, now) if args.since else 0
    pids = await recent_pids(reader, since)
    rules = rules_for(store, now)
    found = [audit for audit, _ in await audit_pids(reader, pids, rules)]
    chosen = sorted(
        (audit for audit in found if audit.status == args.status), key=lambda a: a.last_srv_ms
    )
    if args.json:
        _print_json(
            [
                {
                    "prepared_id": a.pid,
                    "status": a.status,
                    "stage": a.stage,
                    "recovered": a.recovered,
                    "late_outcome_observed": a.late_outcome,
                    "last_event_ms": a.last_srv_ms,
                    "investigate": a.investigate,
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
        print(f"{audit.pid}  {audit.status:<9} {stage:<21} {age_s:>8}s ago  {flags or '-'}{note}")
    print(f"{len(chosen)} send(s) with status {args.status}", file=sys.stderr)
    return OK


async def _export(args: argparse.Namespace, store: LedgerStore) -> int:
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    since = parse_when(args.since, now) if args.since else 0
    until = parse_when(args.until, now) if args.until else None
    if args.pid is not None and not items_are_pid(args.pid):
        print("angelos ledger: --pid takes a prepared_id (32 lowercase hex)", file=sys.stderr)
        return USAGE
    out = args.output.open("wb") if args.output else sys.stdout.buffer
    count = 0
    try:
        async for line in export_lines(reader, since_ms=since, until_ms=until, pid=args.pid):
            out.write(line + b"\n")
            count += 1
    finally:
        if args.output:
            out.close()
        else:
            out.flush()
    if not args.quiet:
        print(f"exported {count} line(s)", file=sys.stderr)
    return OK


async def _recover(args: argparse.Namespace, store: LedgerStore) -> int:
    recoverer = Recoverer(store)
    progress = _Progress("recover", quiet=args.quiet)
    report = await recoverer.run_once(dry_run=args.dry_run, progress=lambda n: progress(n, 0))
    progress.done()
    if args.json:
        _print_json(
            {"dry_run": report.dry_run, "server_ms": report.server_ms,
             "grace_ms": report.grace_ms, "counts": report.counts(),
             "decisions": report.decisions}
        )  # fmt: skip
    else:
        _print_recovery(report)
    return FINDINGS if any(d.action == "corrupt" for d in report.decisions) else OK


async def _acknowledge(args: argparse.Namespace, store: LedgerStore) -> int:
    return OK if await acknowledge_rollback(store) == 0 else FINDINGS


def replay_file(args: argparse.Namespace, store_config: StoreConfig) -> int:
    """`angelos ledger replay FILE`: verify and project an export, no Redis needed."""
    try:
        with args.file.open("rb") as handle:
            export = read_export(handle)
    except OSError as exc:
        print(f"angelos ledger: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return USAGE
    now = int(time.time() * 1000)
    as_of = parse_when(args.as_of, now) if args.as_of else now
    key = None if store_config.hmac_key is None else mac_key(store_config.hmac_key.reveal())
    rules = AuditRules(
        key=key,
        skew_ms=args.skew_ms,
        grace_ms=store_config.recovery_grace_s * 1000,
        retention_ms=store_config.retention_s * 1000,
        as_of_ms=as_of,
    )
    summary = replay_export(export, rules)
    if args.json:
        _print_json(_summary_json(summary))
    else:
        _print_summary(summary, sys.stdout)
    return OK if summary.ok else FINDINGS


# ------------------------------------------------------------------------------ output


def parse_when(text: str, now_ms: int) -> int:
    """Parse ms since epoch, ISO 8601 (UTC unless it says otherwise), or an age like `2h`."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return now_ms - int(relative[1]) * _UNIT_MS[relative[2]]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SystemExit(f"angelos ledger: cannot read the time {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.now().astimezone().tzinfo).astimezone()
    return int(moment.timestamp() * 1000)


def _summary_json(summary: LedgerAudit) -> dict[str, Any]:
    return {
        "ok": summary.ok,
        "streams": summary.streams,
        "events": summary.events,
        "index_entries": summary.index_entries,
        "statuses": summary.statuses,
        "findings": summary.findings,
        "investigate": [
            {"prepared_id": a.pid, "status": a.status, "stage": a.stage, "reason": a.investigate}
            for a in summary.investigate
        ],
        "elapsed_s": round(summary.elapsed_s, 3),
        "events_per_s": round(summary.events / summary.elapsed_s) if summary.elapsed_s else 0,
    }


def _print_summary(summary: LedgerAudit, out: TextIO) -> None:
    rate = summary.events / summary.elapsed_s if summary.elapsed_s else 0
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())) or "none"
    out.write(
        f"{summary.streams} stream(s), {summary.events} event(s), "
        f"{summary.index_entries} index entr(ies) in {summary.elapsed_s:.2f} s "
        f"({rate:,.0f} events/s)\nstatuses: {statuses}\n"
    )
    for finding in summary.findings:
        if finding.pid:
            where = f"{finding.pid} seq {finding.seq}"
        else:  # an export line, or the ledger as a whole
            where = f"line {finding.seq}" if finding.seq else "ledger"
        out.write(f"FINDING {where}: {finding.kind} - {finding.detail}\n")
    for audit in summary.investigate:
        out.write(f"INVESTIGATE {audit.pid}: {audit.status} - {audit.investigate}\n")
    out.write("verified: no findings\n" if summary.ok else f"{len(summary.findings)} finding(s)\n")


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


def _print_json(value: object) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")
    sys.stdout.flush()


class _Progress:
    """At most one progress line a second on stderr, only for runs longer than a second."""

    def __init__(self, what: str, *, quiet: bool) -> None:
        self.what = what
        self.quiet = quiet
        self.started = time.monotonic()
        self.last = self.started
        self.shown = False

    def __call__(self, streams: int, events: int) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last < 1.0:
            return
        self.last = now
        self.shown = True
        rate = events / (now - self.started) if events else 0
        extra = f", {events} events ({rate:,.0f}/s)" if events else ""
        print(f"{self.what}: {streams} done{extra}", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.shown:
            print(
                f"{self.what}: finished in {time.monotonic() - self.started:.1f} s", file=sys.stderr
            )
