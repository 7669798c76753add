"""`angelos ledger evidence`: look for an unknown send's own copy in the provider's Sent folder.

A person asks; the mailbox is only read (EXAMINE, BODY.PEEK). A copy whose Message-ID is exactly
the preparation's is recorded as `outcome_evidence` by `operator:NAME`, and the send's status
becomes `accepted`. No copy proves nothing: nothing is recorded, the status stays `unknown`, and
nothing is ever resent. It works with any IMAP mailbox; recovery searches by itself only where
the provider files its own Sent copies (docs/ledger.md#evidence-from-the-sent-folder).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, Final

from ledger.dispatch.evidence import Search, SentCopy, lifecycle_of, search_and_record
from ledger.lifecycle import AWAITS_EVIDENCE, OPEN, Lifecycle
from ledger.projection import public_state
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError
from service.app import command_mailbox
from service.ledger_cli.common import (
    FINDINGS,
    OK,
    UNREACHABLE,
    USAGE,
    operator_actor,
    print_json,
    unsealed_writer,
)
from service.ledger_cli.resolve import still_open

_PID: Final = re.compile(r"[0-9a-f]{32}", re.ASCII)
ABSENCE: Final = (
    "Absence proves nothing: the provider may not file a copy, may file it late or elsewhere. "
    "The status stays unknown; nothing recorded, nothing resent."
)


def add_evidence_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `evidence` to the `angelos ledger` subcommands."""
    parser = sub.add_parser(
        "evidence",
        help="look for an unknown send's own copy in the provider's Sent folder (never resends)",
    )
    parser.add_argument("prepared_id")
    parser.add_argument("--by", help="who asks (default: the login name)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def evidence_problem(args: argparse.Namespace) -> str | None:
    """Check the arguments without touching the ledger or the mailbox: why not, or None."""
    if not _PID.fullmatch(args.prepared_id):
        return "a prepared_id is 32 lowercase hex characters"
    if operator_actor(args.by) is None:
        return "--by is 1 to 64 letters, digits, '.', '_' or '-'"
    return None


async def evidence(args: argparse.Namespace, store: LedgerStore) -> int:
    """Search the Sent folder(s) for the send's copy; record it when the send is unknown."""
    problem = evidence_problem(args)
    actor = operator_actor(args.by)
    if problem is not None or actor is None:
        print(f"angelos ledger: {problem}", file=sys.stderr)
        return USAGE
    mail = getattr(args, "mail", None)
    if mail is None:
        print(
            "angelos ledger: no mailbox is configured (MAIL_* variables, see "
            "`angelos check-config`): there is no Sent folder to search",
            file=sys.stderr,
        )
        return USAGE
    unsealed = await unsealed_writer(store)
    if unsealed is not None:  # an unsealed or wrongly sealed entry reads forged
        print(f"angelos ledger: {unsealed}. Nothing searched", file=sys.stderr)
        return USAGE
    pid = args.prepared_id
    now, entries = await store.read(pid)
    if not entries:
        print(f"angelos ledger: no ledger stream for {pid}; nothing searched", file=sys.stderr)
        return FINDINGS
    try:
        lifecycle = lifecycle_of(pid, entries)
    except MailError:
        print(
            f"angelos ledger: {pid} fails verification (see `angelos ledger show`); nothing "
            "searched",
            file=sys.stderr,
        )
        return FINDINGS
    if lifecycle.state not in AWAITS_EVIDENCE:
        print(_refusal(pid, lifecycle, now), file=sys.stderr)
        return FINDINGS
    mailbox = command_mailbox(mail, store.client)
    try:
        search = await search_and_record(store, pid, entries, mailbox, actor)
    except MailError as exc:
        print(
            f"angelos ledger: the mailbox search failed ({exc}); nothing recorded, the status "
            "stays unknown",
            file=sys.stderr,
        )
        return UNREACHABLE
    finally:
        await mailbox.aclose()
    message_id = lifecycle.prepared.message_id if lifecycle.prepared is not None else ""
    commit = lifecycle.commit
    submitted = "" if commit is None else commit.raw_sha256
    if args.json:
        print_json(_as_json(search, message_id, submitted, actor))
    else:
        print("\n".join(_as_text(search, message_id, submitted, actor)))
    return OK if search.result == "recorded" else FINDINGS


def _refusal(pid: str, lifecycle: Lifecycle, now_ms: int) -> str:
    if lifecycle.state in OPEN:
        return still_open(pid, lifecycle.state).replace("Nothing recorded", "Nothing searched")
    if lifecycle.state == "EVIDENCED":
        return (
            f"angelos ledger: {pid} is already accepted by evidence (its Sent copy is recorded; "
            "see `angelos ledger show`). Nothing searched"
        )
    status = public_state(lifecycle, now_ms).status
    return (
        f"angelos ledger: {pid} is {status}, not unknown: evidence is recorded only for a send "
        "whose outcome is unknown. Nothing searched"
    )


def _copy_words(copy: SentCopy, submitted: str) -> str:
    place = f"Graph ID {copy.graph_id}" if copy.graph_id else (
        f"UIDVALIDITY {copy.uid_validity}, UID {copy.uid}"
    )
    where = f'folder "{copy.folder}", {place}'
    if copy.sha256 is None:
        return f"{where}: too large to read whole, so its bytes were not compared"
    if submitted and copy.sha256 == submitted:
        return f"{where}: identical to the submitted bytes (raw_sha256 {submitted})"
    return (
        f"{where}: same Message-ID, other bytes (SHA-256 {copy.sha256}; rewritten by the provider)"
    )


def _as_text(search: Search, message_id: str, submitted: str, actor: str) -> list[str]:
    pid = search.pid
    if not search.copies:
        return [f"{pid}: no copy with Message-ID {message_id} in the Sent folder(s).", ABSENCE]
    lines = [f"{pid}: {len(search.copies)} copy(ies) with Message-ID {message_id} in Sent:"]
    lines += [f"  {_copy_words(copy, submitted)}" for copy in search.copies]
    data = search.evidence
    if search.result == "recorded" and data is not None:
        bytes_said = "identical bytes" if data.identical else "other bytes"
        lines.append(
            f"recorded outcome_evidence by {actor} (seq {search.seq}): status accepted "
            f"(evidence: sent_copy, {bytes_said}); nothing was sent"
        )
    else:
        lines.append(
            "nothing recorded: the send changed meanwhile (someone recorded first); see "
            f"`angelos ledger show {pid}`"
        )
    return lines


def _as_json(search: Search, message_id: str, submitted: str, actor: str) -> dict[str, Any]:
    copies = [
        {
            "folder": copy.folder, "uid_validity": copy.uid_validity, "uid": copy.uid,
            "graph_id": copy.graph_id,
            "sha256": copy.sha256,
            "identical": bool(submitted) and copy.sha256 == submitted,
        }
        for copy in search.copies
    ]  # fmt: skip
    recorded = search.result == "recorded"
    status = {"recorded": "accepted", "absent": "unknown"}.get(search.result)  # None: it moved
    return {
        "prepared_id": search.pid,
        "message_id": message_id,
        "result": search.result,
        "status": status,
        "copies": copies,
        "evidence": search.evidence,
        "seq": search.seq if recorded else None,
        "actor": actor,
    }
