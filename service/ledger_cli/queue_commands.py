"""`angelos ledger list` and `recover`: the incident queue, where each open send stands, and what
recovery will decide and from when (docs/runbook.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final, Literal, get_args

from msgspec import Struct

from ledger.audit.checks import AuditRules, StreamAudit, group_index, missing_stream_findings
from ledger.audit.evidence import LeaseCheck, lease_holder, lease_of
from ledger.audit.verify import audit_pids, recent_pids
from ledger.chain import verified_events
from ledger.dispatch.decisions import Action, Decision, RecoveryReport
from ledger.dispatch.recovery import Recoverer
from ledger.lifecycle import Lifecycle, fold
from ledger.projection import rfc3339_seconds
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from schemas.ledger import LedgerEntry
from service.app import command_mailbox
from service.config import MailConfig
from service.ledger_cli.common import (
    FINDINGS,
    OK,
    USAGE,
    Progress,
    parse_when,
    print_json,
    rules_for,
)
from service.ledger_cli.rollback import describe
from service.sending import sent_copy_finder

# What the last lifecycle event of a `sending` send proves about the message so far.
SENDING_STAGES: Final = {
    "CLAIMED": "claimed, no attempt marker",
    "ATTEMPTING": "attempt marker, no commit point",
    "COMMITTED": "past the commit point",
}
Outlook = Literal["too_early", "lease_alive", "decidable_now"]


class Sending(Struct, frozen=True, kw_only=True):
    """Where one `sending` send stands: its stage, its dispatcher's lease, when recovery decides."""

    state: str  # CLAIMED, ATTEMPTING or COMMITTED
    stage: str  # the state in words
    dispatcher_id: str
    lease_alive: bool
    claimed_ms: int
    grace_ms: int  # the grace recovery waits for this claim
    decidable_ms: int  # recovery may decide once the server's time is past this
    recovery: Outlook  # what `angelos ledger recover` would do now


class ListedSend(Struct, frozen=True, kw_only=True):
    """One send as `angelos ledger list` shows it."""

    prepared_id: str
    status: str
    stage: str
    recovered: bool
    late_outcome_observed: bool
    last_event_ms: int
    investigate: str
    resolution: str
    sending: Sending | None = None
    evidence: str = ""  # accepted by its Sent copy: "identical" or "other_bytes"


class SendList(Struct, frozen=True, kw_only=True):
    """What `angelos ledger list --json` prints: the sends, and what the index names in vain."""

    sends: list[ListedSend]
    warnings: list[str]


async def list_sends(args: argparse.Namespace, store: LedgerStore) -> int:
    """List the sends with any event in a time range, of one public status or of all."""
    reader = BulkReader(store.client, store.keys)
    now = await store.server_time_ms()
    since = parse_when(args.since, now) if args.since else 0
    until = parse_when(args.until, now) if args.until else None
    if until is not None and until < since:
        print("angelos ledger: --until is before --since", file=sys.stderr)
        return USAGE
    rules = await rules_for(store, now)
    pids = await recent_pids(reader, since, until)
    found = await audit_pids(reader, pids, rules)
    present = {audit.pid for audit, _ in found}
    warnings = await _missing_streams(reader, [p for p in pids if p not in present], since, rules)
    chosen = sorted(
        (pair for pair in found if args.status in (None, pair[0].status)),
        key=lambda pair: pair[0].last_srv_ms,
    )
    where = await _where_sending(reader, [p for p in chosen if p[0].status == "sending"], rules)
    sends = [_listed(audit, where.get(audit.pid)) for audit, _ in chosen]
    for line in warnings:
        print(f"angelos ledger: warning: {line}", file=sys.stderr)
    if args.json:
        print_json(SendList(sends=sends, warnings=warnings))
        return OK
    for send in sends:
        print(_row(send, now))
    opened = [send.sending for send in sends if send.sending is not None]
    if opened:
        print(sending_summary(opened))
    print(_count(sends, args.status), file=sys.stderr)
    return OK


def decidable_at(ms: int) -> str:
    """The first whole UTC second at which recovery may decide, for a `decidable_ms`."""
    return rfc3339_seconds(ms + 1000)  # recovery decides only once its clock is past `ms`


def sending_summary(opened: Sequence[Sending]) -> str:
    """Say in one line what recovery would make of the sending sends, and what to run."""
    parts: list[str] = []
    alive = sum(item.recovery == "lease_alive" for item in opened)
    early = [item.decidable_ms for item in opened if item.recovery == "too_early"]
    ready = sum(item.recovery == "decidable_now" for item in opened)
    if alive:
        parts.append(f"lease_alive {alive}")
    if early:
        parts.append(f"too_early {len(early)} (first decidable at {decidable_at(min(early))})")
    if ready:
        parts.append(f"decidable now {ready} (run angelos ledger recover)")
    return f"{len(opened)} sending: " + ", ".join(parts)


def _listed(audit: StreamAudit, sending: Sending | None) -> ListedSend:
    return ListedSend(
        prepared_id=audit.pid, status=audit.status, stage=audit.stage,
        recovered=audit.recovered, late_outcome_observed=audit.late_outcome,
        last_event_ms=audit.last_srv_ms, investigate=audit.investigate,
        resolution=audit.resolution, sending=sending, evidence=audit.evidence,
    )  # fmt: skip


async def _where_sending(
    reader: BulkReader, found: Sequence[tuple[StreamAudit, list[LedgerEntry]]], rules: AuditRules
) -> dict[str, Sending]:
    """Fold each sending stream and read its dispatcher's lease (one round trip for all)."""
    claims: list[tuple[str, Lifecycle, str]] = []
    for audit, entries in found:  # the audit folded them too, but keeps only its verdict
        lifecycle = fold(verified_events(audit.pid, entries), [e.srv_ms for e in entries])
        holder = lease_holder(lifecycle)
        if holder is not None:
            claims.append((audit.pid, lifecycle, holder))
    alive = await reader.leases_alive([holder for _, _, holder in claims])
    return {
        pid: _sending(lifecycle, is_alive, rules)
        for (pid, lifecycle, _), is_alive in zip(claims, alive, strict=True)
    }


def _sending(lifecycle: Lifecycle, alive: bool, rules: AuditRules) -> Sending:
    # The same reading of lease and grace as `show`'s evidence (ledger.audit.evidence).
    check = LeaseCheck(
        alive=alive, expires_in_ms=None, configured_grace_ms=rules.grace_ms,
        now_ms=rules.as_of_ms,
    )  # fmt: skip
    lease = lease_of(lifecycle, check)
    assert lease is not None  # a sending send has a claim
    outlook: Outlook = (
        "decidable_now" if lease.decidable_now and not alive
        else "lease_alive" if lease.decidable_now
        else "too_early"
    )  # fmt: skip
    stage = SENDING_STAGES.get(lifecycle.state, lifecycle.state)
    if lifecycle.state == "CLAIMED" and lifecycle.queued:
        stage += ", waiting for a connection"
    return Sending(
        state=lifecycle.state, stage=stage, dispatcher_id=lease.dispatcher_id,
        lease_alive=alive, claimed_ms=lease.open_since_ms, grace_ms=lease.grace_ms,
        decidable_ms=lease.decidable_ms, recovery=outlook,
    )  # fmt: skip


async def _missing_streams(
    reader: BulkReader, pids: Sequence[str], since_ms: int, rules: AuditRules
) -> list[str]:
    """Warn about sends the index names in the range whose streams Redis no longer has."""
    if not pids:
        return []
    by_pid = group_index(await reader.index(since_ms=since_ms))
    warnings: list[str] = []
    ended = 0
    for pid in pids:
        if missing_stream_findings(pid, by_pid.get(pid, []), rules):
            warnings.append(
                f"{pid} is in the index but its stream is gone (deleted?): run angelos ledger "
                "verify"
            )
        else:
            ended += 1
    if ended:
        warnings.append(f"{ended} send(s) in the index have no stream: their retention ended")
    return warnings


def _row(send: ListedSend, now_ms: int) -> str:
    flags = ",".join(
        flag
        for flag, on in (
            ("recovered", send.recovered),
            ("late", send.late_outcome_observed),
            ("evidence", bool(send.evidence)),
        )
        if on
    )
    age_s = (now_ms - send.last_event_ms) // 1000
    line = f"{send.prepared_id}  {send.status:<9} {send.stage or '-':<21} {age_s:>8}s ago  "
    line += flags or "-"
    if send.sending is not None:
        line += f"  {_where(send.sending)}"
    if send.investigate:
        line += f"  {send.investigate}"
    if send.resolution:
        line += f"  resolved: {send.resolution}"
    return line


def _where(sending: Sending) -> str:
    lease = "lease alive" if sending.lease_alive else "lease gone"
    if sending.recovery == "too_early":
        return f"{sending.stage}; {lease}; decidable at {decidable_at(sending.decidable_ms)}"
    if sending.recovery == "lease_alive":
        return f"{sending.stage}; lease alive past the grace: its process holds the claim"
    return f"{sending.stage}; lease gone; decidable now"


def _count(sends: Sequence[ListedSend], status: str | None) -> str:
    if status is not None:
        return f"{len(sends)} send(s) with status {status}"
    counts: dict[str, int] = {}
    for send in sends:
        counts[send.status] = counts.get(send.status, 0) + 1
    by_status = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))
    return f"{len(sends)} send(s)" + (f": {by_status}" if by_status else "")


async def recover(args: argparse.Namespace, store: LedgerStore) -> int:
    """Run one recovery pass (or, with --dry-run, say what it would decide)."""
    mail: MailConfig | None = getattr(args, "mail", None)
    # As in the servers: unknown sends are searched for in Sent only where the provider files
    # its own copies (a dry run only says which it would search; the mailbox opens on use).
    mailbox = None
    if mail is not None and mail.smtp_stores_sent:
        mailbox = command_mailbox(mail, store.client)
    recoverer = Recoverer(store, finder=sent_copy_finder(mail, mailbox))
    progress = Progress("recover", quiet=args.quiet)
    try:
        report = await recoverer.run_once(dry_run=args.dry_run, progress=lambda n: progress(n, 0))
    finally:
        if mailbox is not None:
            await mailbox.aclose()
    progress.done()
    if args.json:
        print_json(
            {"dry_run": report.dry_run, "server_ms": report.server_ms,
             "grace_ms": report.grace_ms, "counts": report.counts(),
             "first_decidable_ms": first_decidable_ms(report), "decisions": report.decisions}
        )  # fmt: skip
    else:
        _print_recovery(report)
    return FINDINGS if any(d.action == "corrupt" for d in report.decisions) else OK


def first_decidable_ms(report: RecoveryReport) -> int | None:
    """The earliest time a claim recovery found too early becomes decidable (None: none)."""
    times = [d.decidable_ms for d in report.decisions if d.action == "too_early" and d.decidable_ms]
    return min(times, default=None)


def recovery_summary(report: RecoveryReport) -> str:
    """Count the decisions by action, saying when the first too-early claim becomes decidable."""
    counts = report.counts()
    first = first_decidable_ms(report)
    parts: list[str] = []
    for action in get_args(Action):
        if counts.get(action):
            when = (
                f", first decidable at {decidable_at(first)}"
                if action == "too_early" and first is not None
                else ""
            )
            parts.append(f"{action} {counts[action]}{when}")
    return "; ".join(parts) or "nothing to do"


def _print_recovery(report: RecoveryReport) -> None:
    if report.halt is not None:
        print(f"{describe(report.halt)}: open sends are quarantined, not classified")
    mode = "dry run: nothing written" if report.dry_run else "recovery pass"
    print(f"{mode} (grace {report.grace_ms // 1000} s): {recovery_summary(report)}")
    for decision in report.decisions:
        verdict = f" -> {decision.verdict}" if decision.verdict else ""
        last = f" after {decision.last_lifecycle_type}" if decision.last_lifecycle_type else ""
        print(
            f"  {decision.pid} {decision.kind:<8} {decision.action}{last}{verdict}{_when(decision)}"
        )


def _when(decision: Decision) -> str:
    if decision.action == "too_early" and decision.decidable_ms:
        return f", decidable at {decidable_at(decision.decidable_ms)}"
    if decision.action in ("no_evidence", "search_failed"):
        if decision.decidable_ms:
            return f", next search at {decidable_at(decision.decidable_ms)}"
        return ", no search left (the status stays unknown)"
    return ""
