"""`angelos ledger …`: the auditor's and incident responder's commands (docs/auditing.md).

Every command reads the same environment as `angelos serve` (ANGELOS_REDIS_URL, namespace,
HMAC key, grace, retention), completed from `--env-file PATH` or ANGELOS_ENV_FILE like serve's;
a refused env file stops every command, since the rest might name another store. All of them
only read, except `recover`, which runs one recovery pass (the same code as the servers'
background task; `--dry-run` writes nothing), `resolve`, which records a person's finding about
a settled send, `evidence`, which records an unknown send's own copy found in the provider's
Sent folder (the mailbox is only read), and `acknowledge-rollback`, which a person runs after
the store went back in time (rollback.py). Text output is for people; `--json` is for machines.
Exit status: 0 clean, 1 findings, 2 usage or configuration, 3 store (or, for `evidence`, mailbox)
unreachable, 4 unverified (no findings, but the MACs could not be checked: no key, or the wrong
one).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from ledger.chain import DEFAULT_SKEW_MS
from ledger.store.ledger_store import LedgerStore
from service.config import Config
from service.ledger_cli.archive_commands import (
    DEFAULT_KEY_NAME,
    archive_command,
    keygen,
    verify_archive,
)
from service.ledger_cli.audit_commands import export, replay, verify
from service.ledger_cli.common import OK, USAGE, with_store
from service.ledger_cli.evidence_command import (
    add_evidence_command,
    evidence,
    evidence_problem,
)
from service.ledger_cli.queue_commands import list_sends, recover
from service.ledger_cli.resolve import add_resolve_command, resolution_from, resolve
from service.ledger_cli.rollback import acknowledge_rollback
from service.ledger_cli.show_command import show

ENV_FILE_HELP = "also read NAME=value settings from this file (the environment wins)"
STATUSES = ("prepared", "sending", "accepted", "rejected", "unknown", "expired", "corrupt")
_WHEN_HELP = "ms since epoch, ISO 8601 UTC, or an age like 2h / 7d"


def add_ledger_commands(parser: argparse.ArgumentParser) -> None:
    """Add the `ledger` subcommands to the `angelos ledger` parser."""
    sub = parser.add_subparsers(dest="ledger_command", required=True)
    verify_parser = sub.add_parser("verify", help="verify every stream, the index and the rules")
    verify_parser.add_argument("--skew-ms", type=int, default=DEFAULT_SKEW_MS)
    verify_parser.add_argument(
        "--html", type=Path, metavar="OUT", help="also write the report as one static HTML page"
    )
    verify_parser.add_argument(
        "--archive", type=Path, metavar="DIR", help="verify this archive directory (no Redis)"
    )
    verify_parser.add_argument(
        "--public-key", metavar="KEY", help="with --archive: the checkpoints' public key, or a file"
    )
    verify_parser.add_argument(
        "--since-checkpoint", type=Path, metavar="FILE",
        help="with --archive: a checkpoint kept from before; the archive must extend it",
    )  # fmt: skip
    verify_parser.add_argument(
        "--live", action="store_true", help="with --archive: compare with the embedded store too"
    )
    verify_parser.add_argument(
        "--offline", action="store_true", help="with --archive: do not compare with any store"
    )
    archive_parser = sub.add_parser(
        "archive", help="archive every ledger event into signed segments (runs until stopped)"
    )
    archive_parser.add_argument("--dir", help="the archive directory (ANGELOS_LEDGER_ARCHIVE_DIR)")
    archive_parser.add_argument(
        "--once", action="store_true", help="archive what is there, sign a checkpoint, exit"
    )
    archive_parser.add_argument(
        "--release", action="store_true",
        help="stop keeping unarchived events: the retention applies to every stream again",
    )  # fmt: skip
    keygen_parser = sub.add_parser("keygen", help="create the archive's checkpoint signing key")
    keygen_parser.add_argument("--name", default=DEFAULT_KEY_NAME, help="the key's name")
    keygen_parser.add_argument(
        "--out", type=Path, metavar="FILE", help="write the signer key here (0600) and FILE.pub"
    )
    show_parser = sub.add_parser("show", help="the timeline of one send and what it proves")
    show_parser.add_argument("prepared_id")
    show_parser.add_argument("--report", type=Path, metavar="FILE.md", help="write a ticket page")
    show_parser.add_argument(
        "--archive", type=Path, metavar="DIR",
        help="prove the send's records against this archive (default ANGELOS_LEDGER_ARCHIVE_DIR)",
    )  # fmt: skip
    show_parser.add_argument(
        "--public-key", metavar="KEY", help="check the checkpoint's signature with this key"
    )
    listing = sub.add_parser("list", help="sends with an event in a time range, and their state")
    listing.add_argument("--status", choices=STATUSES, help="only sends with this public status")
    listing.add_argument("--since", help=_WHEN_HELP)
    listing.add_argument("--until", help=_WHEN_HELP)
    export_parser = sub.add_parser("export", help="JSON Lines of raw entries for offline replay")
    export_parser.add_argument("--since", help=_WHEN_HELP)
    export_parser.add_argument("--until", help="ms since epoch or ISO 8601 UTC")
    export_parser.add_argument("--pid", help="export one stream only")
    export_parser.add_argument("--output", type=Path, help="write here instead of standard output")
    replay_parser = sub.add_parser("replay", help="verify and project an export without Redis")
    replay_parser.add_argument("file", type=Path)
    replay_parser.add_argument("--as-of", help="project as of this time (default: now)")
    replay_parser.add_argument("--skew-ms", type=int, default=DEFAULT_SKEW_MS)
    replay_parser.add_argument(
        "--html", type=Path, metavar="OUT", help="also write the report as one static HTML page"
    )
    recover_parser = sub.add_parser("recover", help="run one recovery pass (never resends)")
    recover_parser.add_argument("--dry-run", action="store_true", help="decide, but write nothing")
    sub.add_parser(
        "acknowledge-rollback",
        help="after the store went back in time: quarantine what is open, let sending resume",
    )
    add_resolve_command(sub)
    add_evidence_command(sub)
    for command in (verify_parser, show_parser, listing, export_parser, replay_parser):
        command.add_argument("--json", action="store_true", help="machine-readable output")
    for command in (verify_parser, show_parser, listing, export_parser, replay_parser,
                    recover_parser, archive_parser):  # fmt: skip
        command.add_argument("--quiet", action="store_true", help="no progress on stderr")
    recover_parser.add_argument("--json", action="store_true", help="machine-readable output")
    for command in sub.choices.values():
        command.add_argument("--env-file", metavar="PATH", help=ENV_FILE_HELP)


def run_ledger(args: argparse.Namespace, config: Config) -> int:
    """Run one `angelos ledger` command; returns the exit status."""
    if args.ledger_command == "keygen":  # needs no configuration at all
        return keygen(args)
    if args.ledger_command == "resolve":  # bad input is refused before any store access
        made = resolution_from(args)
        if isinstance(made, str):
            print(f"angelos ledger: {made}", file=sys.stderr)
            return USAGE
    if args.ledger_command == "evidence":
        problem = evidence_problem(args)
        if problem is not None:
            print(f"angelos ledger: {problem}", file=sys.stderr)
            return USAGE
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
        return replay(args, store_config)
    if args.ledger_command == "verify" and args.archive is not None:
        if not args.public_key:
            print("angelos ledger: verify --archive needs --public-key", file=sys.stderr)
            return USAGE
        return verify_archive(args, store_config)

    if store_config.mode == "off":
        print("angelos ledger: ANGELOS_REDIS_URL=off: no ledger store to read", file=sys.stderr)
        return USAGE
    commands: dict[str, Callable[[argparse.Namespace, LedgerStore], Awaitable[int]]] = {
        "verify": verify,
        "show": show,
        "list": list_sends,
        "export": export,
        "recover": recover,
        "resolve": resolve,
        "evidence": evidence,
        "acknowledge-rollback": _acknowledge,
    }
    if args.ledger_command == "archive":
        return archive_command(args, store_config)
    args.store_config = store_config
    args.mail = config.mail  # `evidence` searches this mailbox; `recover` too, if it files Sent
    command = commands[args.ledger_command]
    return asyncio.run(with_store(store_config, lambda store: command(args, store)))


async def _acknowledge(args: argparse.Namespace, store: LedgerStore) -> int:
    return OK if await acknowledge_rollback(store) == 0 else 1
