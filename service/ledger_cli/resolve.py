"""`angelos ledger resolve`: a person records what they found out about a settled send.

The note is the operator's own words about the investigation ("recipient confirmed by phone",
"ticket 4711"); it must never carry mail content. Everything is checked before the ledger is
read; the store's append script then refuses a resolution of a send that is still open.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Final, Literal, cast

import msgspec

from ledger.chain import verified_events
from ledger.ids import new_id
from ledger.lifecycle import OPEN, UNCLAIMED, fold
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.errors import MailError
from schemas.ledger_events import OperatorResolution
from service.ledger_cli.common import FINDINGS, OK, USAGE, operator_actor, unsealed_writer

OUTCOMES: Final = ("arrived", "not-arrived", "unknown")
_PID: Final = re.compile(r"[0-9a-f]{32}", re.ASCII)


def add_resolve_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `resolve` to the `angelos ledger` subcommands."""
    resolve = sub.add_parser(
        "resolve", help="record what a person found out about a settled send (never resends)"
    )
    resolve.add_argument("prepared_id")
    resolve.add_argument("--outcome", choices=OUTCOMES, required=True)
    resolve.add_argument(
        "--note", required=True, help="your finding in up to 500 characters; no mail content"
    )
    resolve.add_argument("--reprepared-as", metavar="ID", help="the send that replaced it")
    resolve.add_argument("--by", help="who resolves it (default: the login name)")
    resolve.add_argument("--json", action="store_true", help="machine-readable output")


def resolution_from(args: argparse.Namespace) -> tuple[OperatorResolution, str] | str:
    """Check the arguments without touching the ledger: the event and actor, or why not."""
    if not _PID.fullmatch(args.prepared_id):
        return "a prepared_id is 32 lowercase hex characters"
    if args.reprepared_as is not None and not _PID.fullmatch(args.reprepared_as):
        return "--reprepared-as takes a prepared_id (32 lowercase hex characters)"
    if args.reprepared_as == args.prepared_id:
        return "--reprepared-as names the send being resolved"
    actor = operator_actor(args.by)
    if actor is None:
        return "--by is 1 to 64 letters, digits, '.', '_' or '-'"
    note = args.note.strip()
    if not note:
        return "--note is empty: say what you found out"
    outcome = cast(Literal["arrived", "not_arrived", "unknown"], args.outcome.replace("-", "_"))
    try:
        data = msgspec.convert(
            {"outcome": outcome, "note": note, "reprepared_as": args.reprepared_as}
            if args.reprepared_as
            else {"outcome": outcome, "note": note},
            OperatorResolution,
        )
    except msgspec.ValidationError:
        return (
            "--note takes at most 500 printable ASCII characters, without '\"' or '\\' "
            "(the ledger's alphabet)"
        )
    return data, actor


async def resolve(args: argparse.Namespace, store: LedgerStore) -> int:
    """Append the operator's resolution after the send's last event."""
    made = resolution_from(args)
    if isinstance(made, str):  # checked again here for callers that skip run_ledger's check
        print(f"angelos ledger: {made}", file=sys.stderr)
        return USAGE
    data, actor = made
    pid = args.prepared_id
    unsealed = await unsealed_writer(store)
    if unsealed is not None:  # an unsealed or wrongly sealed entry reads forged
        print(f"angelos ledger: {unsealed}. Nothing recorded", file=sys.stderr)
        return USAGE
    _, entries = await store.read(pid)
    if not entries:
        print(f"angelos ledger: no ledger stream for {pid}; nothing recorded", file=sys.stderr)
        return FINDINGS
    try:
        lifecycle = fold(verified_events(pid, entries), [e.srv_ms for e in entries])
    except MailError:
        print(
            f"angelos ledger: {pid} fails verification (see `angelos ledger show`); nothing "
            "recorded",
            file=sys.stderr,
        )
        return FINDINGS
    if lifecycle.state in OPEN:
        print(still_open(pid, lifecycle.state), file=sys.stderr)
        return FINDINGS
    head = head_of(entries)
    assert head is not None
    outcome = await store.append(pid, head, data, actor=actor, eid=new_id())
    if outcome.result not in ("appended", "duplicate"):
        print(
            f"angelos ledger: the store refused the resolution ({outcome.result}); nothing "
            "recorded",
            file=sys.stderr,
        )
        return FINDINGS
    if args.json:
        sys.stdout.buffer.write(
            msgspec.json.encode(
                {"prepared_id": pid, "seq": outcome.seq, "actor": actor, "resolution": data}
            )
            + b"\n"
        )
    else:
        replaced = (
            f", replaced by {data.reprepared_as}" if isinstance(data.reprepared_as, str) else ""
        )
        print(f"{pid}: resolved as {args.outcome}{replaced} by {actor} (seq {outcome.seq})")
    return OK


def still_open(pid: str, state: str) -> str:
    if state in UNCLAIMED:
        return (
            f"angelos ledger: {pid} is an unclaimed preparation; it expires by itself (the "
            "sweeper records it), then it can be resolved. Nothing recorded"
        )
    return (
        f"angelos ledger: {pid} is still open ({state}); recovery decides it first: see "
        "`angelos ledger recover --dry-run` for when. Nothing recorded"
    )
