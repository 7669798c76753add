"""`angelos ledger verify`, `export` and `replay`: the auditor's commands (docs/auditing.md)."""

from __future__ import annotations

import argparse
import sys
import time

import msgspec

from ledger.audit.checks import AuditRules, Finding
from ledger.audit.export import (
    ExportFile,
    every_mac_fails,
    export_lines,
    read_export,
    replay_export,
    sealed_key_id,
)
from ledger.audit.html import render_html
from ledger.audit.manifest import ExportRules, Manifest
from ledger.audit.report import (
    AuditReport,
    Checked,
    build_report,
    macs_state,
    render_text,
    rules_used,
    wrong_key_finding,
)
from ledger.audit.show import iso_ms
from ledger.audit.verify import items_are_pid, verify_ledger
from ledger.chain import key_of
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from service.config import StoreConfig
from service.ledger_cli.common import (
    FINDINGS,
    OK,
    UNVERIFIED,
    USAGE,
    Progress,
    parse_when,
    print_json,
    rules_for,
)
from service.ledger_cli.rollback import rollback_findings


async def verify(args: argparse.Namespace, store: LedgerStore) -> int:
    """Verify every stream, the index and the rules in Redis."""
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    sealed = await store.meta_field("mac_key_id")
    rules = await rules_for(store, now, args.skew_ms)
    macs, given = macs_state(rules.key, sealed)
    if macs == "wrong_key":  # one finding, not a mac_mismatch on every entry
        rules = msgspec.structs.replace(rules, key=None)
    progress = Progress("verify", quiet=args.quiet)
    summary = await verify_ledger(
        reader, rules, progress=progress, keep_steps=args.html is not None
    )
    if macs == "wrong_key":
        summary.findings.insert(0, wrong_key_finding(given, sealed))
    summary.findings += await rollback_findings(store)
    progress.done()
    checked = Checked(
        source="redis", as_of=iso_ms(now), as_of_ms=now, macs=macs, key_id=given,
        sealed_key_id=sealed, completeness="index", rules=rules_used(rules, summary),
    )  # fmt: skip
    return answer(args, build_report(summary, checked))


async def export(args: argparse.Namespace, store: LedgerStore) -> int:
    """Write the manifest, the stored entries and the trailer as JSON Lines."""
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    since = parse_when(args.since, now) if args.since else 0
    until = parse_when(args.until, now) if args.until else None
    if args.pid is not None and not items_are_pid(args.pid):
        print("angelos ledger: --pid takes a prepared_id (32 lowercase hex)", file=sys.stderr)
        return USAGE
    rules = await rules_for(store, now)
    manifest = Manifest(
        namespace=store.settings.namespace,
        store_id=await store.meta_field("store_id"),
        exported_ms=now,
        since_ms=since,
        until_ms=until,
        pid=args.pid or "",
        streams=0,
        index_entries=0,
        mac_key_id=await store.meta_field("mac_key_id"),
        rules=ExportRules(recovery_grace_ms=rules.grace_ms, retention_ms=rules.retention_ms),
    )
    key = rules.key if manifest.mac_key_id else None
    if macs_state(rules.key, manifest.mac_key_id)[0] in ("not_checked", "wrong_key"):
        # The trailer of a sealed ledger's export carries an HMAC; without it a replay with
        # the key could not tell this export from one whose trailer was forged.
        print(
            f"angelos ledger: this ledger is sealed with HMAC key ID {manifest.mac_key_id}; set "
            "its ANGELOS_LEDGER_HMAC_KEY to export it",
            file=sys.stderr,
        )
        return USAGE
    out = args.output.open("wb") if args.output else sys.stdout.buffer
    count = 0
    try:
        async for line in export_lines(reader, manifest, key=key):
            out.write(line + b"\n")
            count += 1
    finally:
        if args.output:
            out.close()
        else:
            out.flush()
    if not args.quiet:
        sealed = "sealed with the ledger key" if key is not None else "hash only, no key"
        print(
            f"exported {count - 2} line(s), with manifest and trailer ({sealed})", file=sys.stderr
        )
    return OK


def replay(args: argparse.Namespace, store_config: StoreConfig) -> int:
    """`angelos ledger replay FILE`: verify and project an export, no Redis needed."""
    try:
        with args.file.open("rb") as handle:
            export_file = read_export(handle)
    except OSError as exc:
        print(f"angelos ledger: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return USAGE
    now = int(time.time() * 1000)
    as_of = parse_when(args.as_of, now) if args.as_of else now
    key = key_of(store_config.hmac_key)
    rules = replay_rules(export_file, store_config, key, as_of, args.skew_ms)
    sealed = sealed_key_id(export_file)
    macs, given = macs_state(key, sealed)
    wrong = macs == "wrong_key" or (
        sealed == "?" and key is not None and every_mac_fails(export_file, key)
    )
    if wrong:
        macs = "wrong_key"
        rules = msgspec.structs.replace(rules, key=None)
    summary = replay_export(export_file, rules, keep_steps=args.html is not None)
    if wrong:
        summary.findings.insert(0, wrong_key_finding(given, sealed))
    elif key is not None and sealed == "" and export_file.manifest is not None:
        summary.findings.insert(0, Finding("", 0, "mac_key_mismatch", (
            "a key was given but the export names no sealing key: made from a ledger without "
            "a key, or its MACs were stripped")))  # fmt: skip
    checked = Checked(
        source="export", as_of=iso_ms(as_of), as_of_ms=as_of, macs=macs, key_id=given,
        sealed_key_id=sealed,
        completeness="manifest" if export_file.manifest is not None else "not_checked",
        rules=rules_used(rules, summary),
    )  # fmt: skip
    return answer(args, build_report(summary, checked, export_file.manifest))


def replay_rules(
    export_file: ExportFile, config: StoreConfig, key: bytes | None, as_of: int, skew_ms: int
) -> AuditRules:
    """The rules a replay applies: the manifest's, else this machine's settings."""
    manifest = export_file.manifest
    if manifest is not None:
        return AuditRules(
            key=key, skew_ms=skew_ms, as_of_ms=as_of,
            grace_ms=manifest.rules.recovery_grace_ms, grace_source="manifest",
            retention_ms=manifest.rules.retention_ms, retention_source="manifest",
        )  # fmt: skip
    return AuditRules(
        key=key, skew_ms=skew_ms, as_of_ms=as_of,
        grace_ms=config.recovery_grace_s * 1000, grace_source="environment",
        retention_ms=config.retention_s * 1000, retention_source="environment",
    )  # fmt: skip


def answer(args: argparse.Namespace, report: AuditReport) -> int:
    """Print a report (text or --json, and --html) and return the exit status it earns."""
    if args.json:  # the same with or without --html: the timelines go to the page only
        print_json(msgspec.structs.replace(report, sends=[]) if report.sends else report)
    else:
        sys.stdout.write(render_text(report))
    if args.html is not None and not _write_html(args, report):
        return USAGE
    if not report.ok:
        return FINDINGS
    return UNVERIFIED if report.verdict == "unverified" else OK


def _write_html(args: argparse.Namespace, report: AuditReport) -> bool:
    """Write the report's HTML page to `--html OUT`; say on stderr why not, if it fails."""
    try:
        args.html.write_text(render_html(report), encoding="utf-8")
    except OSError as exc:
        print(f"angelos ledger: cannot write {args.html}: {exc.strerror}", file=sys.stderr)
        return False
    if not args.quiet:
        print(f"HTML report written to {args.html}", file=sys.stderr)
    return True
