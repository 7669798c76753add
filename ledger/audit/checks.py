"""The auditor's checks: chain, state machine, rules, index, verdicts.

Everything here is pure: it takes stored entries (from Redis through store.bulk, or from an
export file) and returns findings. Nothing is written, nothing is guessed; a stream that fails a
check is reported with its prepared_id and the sequence number of the first bad entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec
from msgspec import Struct, UnsetType, field

from ledger.chain import DEFAULT_SKEW_MS, checked_events
from ledger.lifecycle import Lifecycle, advance, recorded_grace
from ledger.projection import public_state
from ledger.store.bulk import IndexEntry
from schemas.errors import MailError
from schemas.ledger import Event, InvalidTransition, LedgerEntry, decode_event
from schemas.ledger_events import (
    ANNOTATION_TYPES,
    Claimed,
    OutcomeEvidence,
    Prepared,
    RecoveryClassified,
    SentFilingFailed,
)

# What recovery must have seen last when it wrote each classification.
CLOSED_FROM: Final = {
    "not_attempted": "claimed",
    "not_submitted": "smtp_attempt_started",
    "unknown": "smtp_commit_point",
}
_INDEX_SLACK_MS: Final = 60_000


class Finding(Struct, frozen=True):
    """One anomaly: which send, which entry (0 when not tied to one), what kind, in words."""

    pid: str
    seq: int
    kind: str
    detail: str


RuleSource = Literal["default", "environment", "ledger", "manifest"]


class AuditRules(Struct, frozen=True, kw_only=True):
    """What the auditor checks against: MAC key, clock skew, recovery grace and the 'now'.

    `grace_ms` and `retention_ms` are fallbacks: a claim that recorded the grace in force is
    judged by that, and a stream that recorded its retention by that.
    """

    key: bytes | None = None
    skew_ms: int = DEFAULT_SKEW_MS
    grace_ms: int = 900_000
    retention_ms: int = 604_800_000
    as_of_ms: int = 0
    grace_source: RuleSource = "default"
    retention_source: RuleSource = "default"


class StreamAudit(Struct, frozen=True, kw_only=True):
    """The verdict on one stream: its replayed public status and every finding."""

    pid: str
    events: int
    status: str  # the public status as of the audit time, or "corrupt"
    stage: str = ""
    recovered: bool = False
    late_outcome: bool = False
    last_srv_ms: int = 0
    findings: list[Finding] = field(default_factory=list)
    investigate: str = ""  # why a person should look at this send ("" when nothing)
    resolution: str = ""  # the latest operator resolution's outcome ("" when none)
    grace_recorded: bool = False  # judged by the grace recorded at its claim
    state: str = ""  # the lifecycle state (its stage while sending: CLAIMED, ATTEMPTING, ...)
    evidence: str = ""  # accepted by its Sent copy: "identical" or "other_bytes" ("" when not)


def audit_stream(pid: str, entries: Sequence[LedgerEntry], rules: AuditRules) -> StreamAudit:
    """Check one stream and replay its public status as of `rules.as_of_ms`."""
    last_srv = max([entry.srv_ms for entry in entries], default=0)
    # One walk decodes each event once and finds every chain problem; a clock skew alone is a
    # finding about a stream that still verifies, anything else makes the stream corrupt.
    problems, events = checked_events(pid, entries, key=rules.key, skew_ms=rules.skew_ms)
    findings = [Finding(pid, p.seq, p.kind, p.detail) for p in problems]
    if any(p.kind != "clock_skew" for p in problems):
        return _corrupt(pid, len(entries), last_srv, findings)
    lifecycle, broken = _fold(pid, entries, events)
    if broken is not None:
        findings.append(broken)
        return _corrupt(pid, len(entries), last_srv, findings)
    findings += _rules(pid, entries, events, lifecycle, rules)
    # The status, stage and recovery are all the verdict needs of the public answer.
    answer = public_state(lifecycle, rules.as_of_ms)
    late = any(event.type == "late_outcome_observed" for event in events)
    reason = investigate_reason(
        answer.status,
        flagged=bool(findings),
        late=late,
        rollback=answer.stage == "store_rollback",
        state=lifecycle.state,
        claimed_srv_ms=lifecycle.claimed_srv_ms,
        filing_srv_ms=lifecycle.filing_srv_ms,
        rules=msgspec.structs.replace(rules, grace_ms=grace_of(lifecycle, rules)),
        resolved=bool(lifecycle.resolutions),
    )
    return StreamAudit(
        pid=pid,
        events=len(entries),
        status=answer.status,
        stage=answer.stage or "",
        recovered=answer.recovered,
        late_outcome=late,
        last_srv_ms=last_srv,
        findings=findings,
        investigate=reason,
        resolution=lifecycle.resolutions[-1].outcome if lifecycle.resolutions else "",
        grace_recorded=recorded_grace(lifecycle) is not None,
        state=lifecycle.state,
        evidence=evidence_said(lifecycle.evidence),
    )


def evidence_said(evidence: OutcomeEvidence | None) -> str:
    """Name how an unknown send was proven accepted: "identical", "other_bytes" or ""."""
    if evidence is None:
        return ""
    return "identical" if evidence.identical else "other_bytes"


def grace_of(lifecycle: Lifecycle, rules: AuditRules) -> int:
    """The recovery grace this send is judged by: the one recorded at its claim, if any."""
    recorded = recorded_grace(lifecycle)
    return rules.grace_ms if recorded is None else recorded


def retention_of(entries: Sequence[LedgerEntry], rules: AuditRules) -> int:
    """The retention this stream is judged by: the one its preparation recorded, if any."""
    if entries:
        try:
            data = decode_event(entries[0].e).data
        except MailError:
            return rules.retention_ms
        if isinstance(data, Prepared) and not isinstance(data.retention_ms, UnsetType):
            return data.retention_ms
    return rules.retention_ms


def _corrupt(pid: str, events: int, last_srv: int, findings: list[Finding]) -> StreamAudit:
    """The verdict on a stream whose chain or stored transitions do not hold."""
    return StreamAudit(
        pid=pid,
        events=events,
        status="corrupt",
        last_srv_ms=last_srv,
        findings=findings,
        investigate="integrity findings",
    )


def _fold(
    pid: str, entries: Sequence[LedgerEntry], events: Sequence[Event]
) -> tuple[Lifecycle, Finding | None]:
    lifecycle = Lifecycle()
    for entry, event in zip(entries, events, strict=True):
        try:
            lifecycle = advance(lifecycle, event, entry.srv_ms)
        except InvalidTransition as exc:
            return lifecycle, Finding(pid, event.seq, "invalid_transition", exc.message)
    return lifecycle, None


def _rules(
    pid: str,
    entries: Sequence[LedgerEntry],
    events: Sequence[Event],
    lifecycle: Lifecycle,
    rules: AuditRules,
) -> list[Finding]:
    """The claim matches the preparation; recovery waited out the grace and closed what it saw;
    evidence calls a copy identical exactly when its hash is the commit point's."""
    found: list[Finding] = []
    prepared = lifecycle.prepared
    commit = lifecycle.commit
    grace_ms = grace_of(lifecycle, rules)
    claim_srv = lifecycle.claimed_srv_ms
    filing_srv = lifecycle.filing_srv_ms
    last_lifecycle = ""
    for entry, event in zip(entries, events, strict=True):
        data = event.data
        if isinstance(data, Claimed) and isinstance(prepared, Prepared):
            if data.confirmed_digest != prepared.digest:
                found.append(
                    Finding(pid, event.seq, "claim_digest", "claim confirms another digest")
                )
            if entry.srv_ms >= prepared.expires_ms:
                found.append(Finding(pid, event.seq, "claim_expired", "claimed after the deadline"))
        elif isinstance(data, RecoveryClassified):
            if claim_srv is None or entry.srv_ms - claim_srv < grace_ms:
                found.append(
                    Finding(pid, event.seq, "recovery_early", "recovery wrote within the grace")
                )
            if (
                data.last_lifecycle_type != last_lifecycle
                or CLOSED_FROM[data.classification] != last_lifecycle
            ):
                found.append(
                    Finding(pid, event.seq, "recovery_mismatch", "recovery closed another state")
                )
        elif isinstance(data, OutcomeEvidence):
            same = commit is not None and data.sha256 == commit.raw_sha256
            if data.identical != same:
                found.append(
                    Finding(
                        pid, event.seq, "evidence_mismatch",
                        "the evidence's 'identical' contradicts the hashes it names",
                    )
                )  # fmt: skip
        elif (
            isinstance(data, SentFilingFailed)
            and event.actor.startswith("recovery:")
            and (filing_srv is None or entry.srv_ms - filing_srv < grace_ms)
        ):
            found.append(
                Finding(pid, event.seq, "recovery_early", "recovery wrote within the grace")
            )
        if event.type not in ANNOTATION_TYPES:
            last_lifecycle = event.type
    return found


def investigate_reason(
    status: str,
    *,
    flagged: bool,
    late: bool,
    rollback: bool = False,
    state: str,
    claimed_srv_ms: int | None,
    filing_srv_ms: int | None,
    rules: AuditRules,
    resolved: bool = False,
) -> str:
    """Name the reason a person must look at this send, or "" (a resolved send has none)."""
    if flagged:
        return "integrity findings"
    if resolved:
        return ""
    if late:
        return "late outcome observed after recovery"
    if state == "EVIDENCED":
        return ""  # the provider's own Sent copy settled it: accepted
    if rollback:
        return "quarantined after a store rollback: may have been sent"
    if status == "unknown":
        return "outcome unknown: may have been sent"
    if status == "sending" and _older(claimed_srv_ms, rules):
        return "still sending past the recovery grace"
    if state == "FILING" and _older(filing_srv_ms, rules):
        return "Sent filing open past the recovery grace"
    return ""


def _older(since_ms: int | None, rules: AuditRules) -> bool:
    return since_ms is not None and rules.as_of_ms - since_ms > rules.grace_ms


# ---------------------------------------------------------------------------------------------
# Index consistency


def group_index(index: Iterable[IndexEntry]) -> dict[str, list[IndexEntry]]:
    """Group index entries by pid, keeping their order."""
    grouped: dict[str, list[IndexEntry]] = {}
    for item in index:
        grouped.setdefault(item.pid, []).append(item)
    return grouped


def index_findings(
    pid: str,
    entries: Sequence[LedgerEntry],
    indexed: Sequence[IndexEntry],
    rules: AuditRules,
) -> list[Finding]:
    """Compare one stream with its index entries: each event indexed exactly once, and back."""
    found: list[Finding] = []
    by_seq: dict[int, list[IndexEntry]] = {}
    for item in indexed:
        by_seq.setdefault(item.seq, []).append(item)
    window_start: int | None = None
    for entry in entries:
        matches: Sequence[IndexEntry] = by_seq.pop(entry.seq, ())
        if len(matches) > 1:
            found.append(Finding(pid, entry.seq, "index_duplicate", "event indexed more than once"))
        elif not matches:
            if window_start is None:  # only now: reading the retention decodes entry 1 again
                window_start = rules.as_of_ms - retention_of(entries, rules) + _INDEX_SLACK_MS
            if entry.srv_ms >= window_start:
                found.append(Finding(pid, entry.seq, "index_missing", "event has no index entry"))
        elif matches[0].t != entry.t or matches[0].h != entry.h:
            found.append(Finding(pid, entry.seq, "index_mismatch", "index type or hash differs"))
    for seq in sorted(by_seq):
        found.append(
            Finding(pid, seq, "missing_entry", "indexed event absent from the stream (deleted?)")
        )
    return found


def missing_stream_findings(
    pid: str, indexed: Sequence[IndexEntry], rules: AuditRules
) -> list[Finding]:
    """Report a stream that the index names but Redis no longer has, unless retention ended."""
    lifecycle = [item for item in indexed if item.t not in ANNOTATION_TYPES]
    newest = max((item.ms for item in lifecycle or indexed), default=0)
    if newest + rules.retention_ms <= rules.as_of_ms:
        return []  # the stream's retention ended: its absence is expected
    seq = max((item.seq for item in indexed), default=0)
    return [Finding(pid, seq, "missing_stream", "indexed stream is gone (deleted?)")]


def with_findings(audit: StreamAudit, extra: Sequence[Finding]) -> StreamAudit:
    """Add findings made outside the stream (its index, its stored fields) to its verdict."""
    if not extra:
        return audit
    return msgspec.structs.replace(
        audit,
        findings=[*audit.findings, *extra],
        investigate=audit.investigate or "integrity findings",
    )
