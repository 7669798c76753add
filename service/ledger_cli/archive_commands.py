"""`angelos ledger keygen`, `archive` and `verify --archive`: the signed archive's commands."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from ledger.archive.archiver import Archiver, ArchiveRefused, ArchiveSettings
from ledger.archive.audit import (
    ArchiveRead,
    archive_rules,
    audit_archive,
    consistent_from,
    read_archive,
    sealed_key_ids,
)
from ledger.archive.checkpoint import parse as parse_checkpoint
from ledger.archive.live import LiveComparison, compare_live
from ledger.archive.segments import ArchiveDamaged
from ledger.archive.signed_note import (
    NoteError,
    generate_key,
    open_note,
)
from ledger.audit.report import ArchiveChecked, Checked, build_report, macs_state, rules_used
from ledger.audit.show import iso_ms
from ledger.chain import key_of
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError
from service.archive_task import archive_settings
from service.config import StoreConfig
from service.ledger_cli.audit_commands import answer
from service.ledger_cli.common import FINDINGS, OK, USAGE, public_key_of, with_store

DEFAULT_KEY_NAME = "angelos-audit"


def keygen(args: argparse.Namespace) -> int:
    """Create an Ed25519 signer key for the archive's checkpoints and its public key."""
    try:
        signer, verifier = generate_key(args.name)
    except ValueError as exc:
        print(f"angelos ledger: {exc}", file=sys.stderr)
        return USAGE
    if args.out is None:
        print("# Set on the archiving server; keep it secret:")
        print(f"ANGELOS_AUDIT_SIGNING_KEY={signer.text()}")
        print("# The public key, for auditors (verify --archive DIR --public-key KEY):")
        print(verifier.text())
        return OK
    public = Path(str(args.out) + ".pub")
    try:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(signer.text() + "\n")
        public.write_text(verifier.text() + "\n", encoding="ascii")
    except FileExistsError:
        print(f"angelos ledger: {args.out} exists; not overwritten", file=sys.stderr)
        return USAGE
    except OSError as exc:
        print(f"angelos ledger: cannot write {args.out}: {exc.strerror}", file=sys.stderr)
        return USAGE
    print(
        f"signer key written to {args.out} (mode 0600): set ANGELOS_AUDIT_SIGNING_KEY to its "
        "line on the archiving server, and keep it secret"
    )
    print(f"public key written to {public}:")
    print(verifier.text())
    return OK


def archive_command(args: argparse.Namespace, config: StoreConfig) -> int:
    """`angelos ledger archive`: its settings are checked before the store is opened."""
    settings = archive_settings(config, args.dir)
    if isinstance(settings, str):
        print(f"angelos ledger: {settings}", file=sys.stderr)
        return USAGE
    return asyncio.run(with_store(config, lambda store: archive(args, store, settings)))


async def archive(args: argparse.Namespace, store: LedgerStore, settings: ArchiveSettings) -> int:
    """Run the archiver until stopped (or, with --once, until it has caught up)."""
    archiver = Archiver.for_client(store.client, store.keys, settings)
    try:
        await archiver.start()
        if args.release:
            await archiver.position.release()
            retention = settings.retention_ms if archiver.enrolled is None else (
                archiver.enrolled.retention_ms
            )
            kept = await archiver.position.keep_streams(False, retention)
            print(f"archive released: the retention applies again to {kept} stream(s)")
            return OK
        if args.once:
            total = 0
            while (taken := await archiver.run_once()) > 0:
                total += taken
        else:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await archiver.run(stop)
            total = -1
    except (ArchiveRefused, ArchiveDamaged) as exc:
        print(f"angelos ledger: the archiver stopped: {exc}", file=sys.stderr)
        return FINDINGS
    finally:
        with contextlib.suppress(ArchiveRefused, MailError):
            await archiver.close()
    if not args.quiet:
        taken_words = "" if total < 0 else f"{total} index entr(ies) taken; "
        print(
            f"archive {settings.root}: {taken_words}{archiver.frontier.size} record(s), "
            f"latest checkpoint at {max(archiver.checkpoint_size, 0)}",
            file=sys.stderr,
        )
    return OK


def verify_archive(args: argparse.Namespace, config: StoreConfig | None) -> int:
    """Verify an archive directory offline; with a store, hold the live ledger against it."""
    try:
        key = public_key_of(args.public_key)
    except (OSError, ValueError) as exc:
        print(f"angelos ledger: --public-key: {exc}", file=sys.stderr)
        return USAGE
    earlier = None
    if args.since_checkpoint is not None:
        try:
            earlier = parse_checkpoint(open_note(args.since_checkpoint.read_bytes(), key))
        except (OSError, NoteError, ValueError) as exc:
            print(f"angelos ledger: --since-checkpoint: {exc}", file=sys.stderr)
            return USAGE
    if not args.archive.is_dir():
        print(f"angelos ledger: {args.archive} is not a directory", file=sys.stderr)
        return USAGE
    started = time.perf_counter()
    found = read_archive(args.archive, key)
    now = int(time.time() * 1000)
    hmac_key = None if config is None else key_of(config.hmac_key)
    sealed = ",".join(sealed_key_ids(found))
    macs, given = macs_state(hmac_key, sealed)
    rules = archive_rules(found, hmac_key if macs != "wrong_key" else None, now, args.skew_ms)
    summary = audit_archive(found, rules, keep_steps=args.html is not None)
    if earlier is not None and (rolled := consistent_from(found, earlier)) is not None:
        summary.findings.insert(0, rolled)
    live, store_archived, later = _live_choice(args, config), -1, 0
    if live == "checked" and config is not None:
        compared = asyncio.run(_compare(config, found, now, rules.retention_ms))
        if isinstance(compared, str):
            live = compared
        else:
            summary.findings += compared.findings
            store_archived, later = compared.archived_in_store, compared.not_yet_archived
    summary.elapsed_s = time.perf_counter() - started
    latest = found.checkpoints[-1] if found.checkpoints else None
    checked = Checked(
        source="archive", as_of=iso_ms(now), as_of_ms=now, macs=macs, key_id=given,
        sealed_key_id=sealed, completeness="checkpoints", rules=rules_used(rules, summary),
        archive=ArchiveChecked(
            records=len(found.leaves), segments=found.segments,
            public_key=f"{key.name} ({key.key_id})", checkpoints=len(found.checkpoints),
            signed_records=0 if latest is None else latest.size,
            origin="" if latest is None else latest.origin, live=live,
            store_archived=store_archived, not_yet_archived=later,
        ),
    )  # fmt: skip
    return answer(args, build_report(summary, checked))


def _live_choice(args: argparse.Namespace, config: StoreConfig | None) -> str:
    if args.offline:
        return "--offline"
    if config is None or config.mode == "off":
        return "no ledger store configured"
    if config.mode != "redis" and not args.live:
        return "no ANGELOS_REDIS_URL set; --live compares with the embedded store"
    return "checked"


async def _compare(
    config: StoreConfig, found: ArchiveRead, now: int, retention_ms: int
) -> LiveComparison | str:
    result: list[LiveComparison | str] = []

    async def body(store: LedgerStore) -> int:
        store_id = await store.meta_field("store_id")
        archived_ids = {rules.store_id for rules in found.rules}
        if archived_ids and store_id not in archived_ids:
            result.append(f"the configured store is {store_id or 'empty'}, not the archived one")
            return OK
        reader = BulkReader(store.client, store.keys)
        result.append(await compare_live(found, reader, now, retention_ms))
        return OK

    code = await with_store(config, body)
    if not result:
        return f"the store could not be read (exit {code})"
    return result[0]
