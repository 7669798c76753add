"""What `verify` and `replay` report: what was checked, under which key and rules, as of when,
then the counts, findings, open items and resolutions. One Struct for text, JSON and HTML.

The JSON form carries `schema` ("angelos.ledger.audit/1"); docs/auditing.md describes it and
fields are only ever added within one schema version.
"""

from __future__ import annotations

from typing import Final, Literal

from msgspec import Struct, field

from ledger.audit.checks import AuditRules, Finding, StreamAudit
from ledger.audit.manifest import Manifest
from ledger.audit.show import iso_ms
from ledger.audit.summary import LedgerAudit, SendSteps
from ledger.chain import mac_key_id

AUDIT_SCHEMA: Final = "angelos.ledger.audit/1"
Macs = Literal["checked", "not_checked", "wrong_key", "unsealed"]
Completeness = Literal["index", "manifest", "checkpoints", "not_checked"]


class RuleUsed(Struct, frozen=True, kw_only=True):
    """One rule a verdict depends on, its value and where the value came from."""

    name: Literal["recovery_grace_ms", "retention_ms", "skew_ms"]
    value_ms: int
    source: str  # default | environment | ledger | manifest | command line
    recorded_sends: int = 0  # sends judged instead by the value recorded in their own events


class ArchiveChecked(Struct, frozen=True, kw_only=True):
    """What a run over an archive checked: records, signed checkpoints, the live store."""

    records: int
    segments: int
    public_key: str  # the verifier key's name and ID
    checkpoints: int  # signed checkpoints that verified
    signed_records: int  # the latest verified checkpoint's tree size
    origin: str = ""
    live: str  # "checked" or why not
    store_archived: int = -1  # records the store says were archived (-1: not compared)
    not_yet_archived: int = 0  # live index entries after the archive's position


class Checked(Struct, frozen=True, kw_only=True):
    """What a run checked: MACs (and under which key ID), completeness, rules and the time."""

    source: Literal["redis", "export", "archive"]
    as_of: str
    as_of_ms: int
    macs: Macs
    key_id: str = ""  # the ID of the key given to this run ("" without one)
    sealed_key_id: str = ""  # the ID the ledger or export was sealed under ("?" when unknown)
    completeness: Completeness
    rules: list[RuleUsed] = field(default_factory=list)
    archive: ArchiveChecked | None = None


class OpenItem(Struct, frozen=True, kw_only=True):
    """A send a person should look at, or one a person has resolved."""

    prepared_id: str
    status: str
    stage: str
    reason: str = ""
    resolution: str = ""
    evidence: str = ""  # accepted by its Sent copy: "identical" or "other_bytes"


class AuditReport(Struct, kw_only=True):
    """The whole answer of `verify` or `replay`."""

    schema: str = AUDIT_SCHEMA
    verdict: Literal["verified", "unverified", "findings"]
    ok: bool
    checked: Checked
    manifest: Manifest | None = None
    streams: int
    events: int
    index_entries: int
    statuses: dict[str, int]
    findings: list[Finding]
    investigate: list[OpenItem]
    resolved: list[OpenItem]
    elapsed_s: float
    events_per_s: int
    sends: list[SendSteps] = field(default_factory=list)  # only when kept (the HTML report)
    evidenced: list[OpenItem] = field(default_factory=list)  # unknown, then proven accepted


def macs_state(key: bytes | None, sealed_key_id: str) -> tuple[Macs, str]:
    """Say whether MACs are checked, given the key (if any) and the sealing key's ID."""
    if key is None:
        return ("not_checked" if sealed_key_id else "unsealed"), ""
    given = mac_key_id(key)
    if sealed_key_id in ("", "?", given):
        return "checked", given
    return "wrong_key", given


def wrong_key_finding(given: str, sealed: str) -> Finding:
    """The one finding a wrong key gives (rather than a `mac_mismatch` on every entry)."""
    sealed_as = f"key ID {sealed}" if sealed not in ("", "?") else "another key"
    return Finding(
        "", 0, "mac_key_mismatch",
        f"the ledger was sealed with {sealed_as}; the key given has ID {given}: a wrong key, "
        "not a forgery; MACs were not checked",
    )  # fmt: skip


def rules_used(rules: AuditRules, summary: LedgerAudit) -> list[RuleUsed]:
    """The rules as applied, with their sources."""
    return [
        RuleUsed(
            name="recovery_grace_ms", value_ms=rules.grace_ms, source=rules.grace_source,
            recorded_sends=summary.grace_recorded,
        ),
        RuleUsed(name="retention_ms", value_ms=rules.retention_ms, source=rules.retention_source),
        RuleUsed(name="skew_ms", value_ms=rules.skew_ms, source="command line"),
    ]  # fmt: skip


def build_report(
    summary: LedgerAudit, checked: Checked, manifest: Manifest | None = None
) -> AuditReport:
    """Put a run's summary and what it checked into one report."""
    if summary.findings:
        verdict: Literal["verified", "unverified", "findings"] = "findings"
    elif checked.macs == "not_checked":
        verdict = "unverified"
    else:
        verdict = "verified"
    rate = round(summary.events / summary.elapsed_s) if summary.elapsed_s else 0
    return AuditReport(
        verdict=verdict,
        ok=not summary.findings,
        checked=checked,
        manifest=manifest,
        streams=summary.streams,
        events=summary.events,
        index_entries=summary.index_entries,
        statuses=summary.statuses,
        findings=summary.findings,
        investigate=[_item(a) for a in summary.investigate],
        resolved=[_item(a) for a in summary.resolved],
        evidenced=[_item(a) for a in summary.evidenced],
        elapsed_s=round(summary.elapsed_s, 3),
        events_per_s=rate,
        sends=summary.sends,
    )


def _item(audit: StreamAudit) -> OpenItem:
    return OpenItem(
        prepared_id=audit.pid, status=audit.status, stage=audit.stage,
        reason=audit.investigate, resolution=audit.resolution, evidence=audit.evidence,
    )  # fmt: skip


def checked_lines(checked: Checked) -> list[str]:
    """Say in words what was checked."""
    macs = {
        "checked": f"MACs: checked under key ID {checked.key_id}",
        "not_checked": f"MACs: NOT checked (sealed under key ID {checked.sealed_key_id}; no key "
        "given: set ANGELOS_LEDGER_HMAC_KEY)",
        "wrong_key": f"MACs: NOT checked (sealed under key ID {checked.sealed_key_id}, the key "
        f"given has ID {checked.key_id})",
        "unsealed": "MACs: none (the ledger has no HMAC key)",
    }[checked.macs]
    completeness = {
        "index": "completeness: every stream and event held against the index",
        "manifest": "completeness: every line held against the export's manifest and trailer",
        "checkpoints": "completeness: every record held against the signed checkpoints",
        "not_checked": "completeness: NOT checked (an export without manifest: removed sends "
        "and a cut tail cannot be seen)",
    }[checked.completeness]
    rules = [
        f"{_RULE_NAMES[rule.name]} {duration(rule.value_ms)} (from the {rule.source})"
        for rule in checked.rules
    ]
    recorded = sum(rule.recorded_sends for rule in checked.rules)
    if recorded:
        rules.append(f"{recorded} send(s) judged by the grace recorded at their claim")
    return [
        macs,
        completeness,
        *([] if checked.archive is None else archive_lines(checked.archive)),
        "rules: " + "; ".join(rules),
        f"as of: {checked.as_of}",
    ]


def archive_lines(archive: ArchiveChecked) -> list[str]:
    """Say what an archive run covered: records, signatures and the live store."""
    unsigned = archive.records - archive.signed_records
    lines = [
        f"archive: {archive.records} record(s) in {archive.segments} segment(s); "
        f"{archive.checkpoints} checkpoint(s) verified under {archive.public_key}, the latest "
        f"signing {archive.signed_records} record(s)"
        + (f" ({unsigned} record(s) after it not yet signed)" if unsigned > 0 else ""),
    ]
    if archive.live == "checked":
        lines.append(
            f"live store: compared; it counts {archive.store_archived} archived record(s), "
            f"{archive.not_yet_archived} index entr(ies) not yet archived"
        )
    else:
        lines.append(f"live store: NOT compared ({archive.live})")
    return lines


def manifest_line(manifest: Manifest) -> str:
    """Say which ledger an export came from, when, and which part of it."""
    if manifest.pid:
        part = f"send {manifest.pid}"
    elif manifest.since_ms or manifest.until_ms is not None:
        until = "now" if manifest.until_ms is None else iso_ms(manifest.until_ms)
        part = f"events from {iso_ms(manifest.since_ms)} to {until}"
    else:
        part = "the whole ledger"
    return (
        f"export: namespace {manifest.namespace}, made {iso_ms(manifest.exported_ms)}, {part}, "
        f"{manifest.streams} send(s)"
    )


_RULE_NAMES: Final = {
    "recovery_grace_ms": "recovery grace",
    "retention_ms": "retention",
    "skew_ms": "clock skew",
}


def duration(ms: int) -> str:
    """Render a rule's milliseconds in the unit a person reads: days, seconds or ms."""
    if ms % 86_400_000 == 0:
        return f"{ms // 86_400_000} d"
    if ms % 1000 == 0:
        return f"{ms // 1000} s"
    return f"{ms} ms"


def evidence_words(evidence: str) -> str:
    """Say how a send whose outcome was lost was proven accepted."""
    bytes_said = "identical bytes" if evidence == "identical" else "other bytes"
    return f"outcome lost, the provider's own Sent copy found ({bytes_said})"


def render_text(report: AuditReport) -> str:
    """Render a report for a person: counts, what was checked, findings, open items, verdict."""
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.statuses.items())) or "none"
    out = [
        f"{report.streams} stream(s), {report.events} event(s), {report.index_entries} index "
        f"entr(ies) in {report.elapsed_s:.2f} s ({report.events_per_s:,} events/s)",
        f"statuses: {statuses}",
    ]
    if report.manifest is not None:
        out.append(manifest_line(report.manifest))
    out += checked_lines(report.checked)
    for finding in report.findings:
        if finding.pid:
            where = f"{finding.pid} seq {finding.seq}"
        else:  # an export line, or the ledger as a whole
            where = f"line {finding.seq}" if finding.seq else "ledger"
        out.append(f"FINDING {where}: {finding.kind} - {finding.detail}")
    for item in report.investigate:
        out.append(f"INVESTIGATE {item.prepared_id}: {item.status} - {item.reason}")
    for item in report.resolved:
        out.append(f"RESOLVED {item.prepared_id}: {item.status} - {item.resolution}")
    for item in report.evidenced:
        out.append(f"EVIDENCE {item.prepared_id}: {item.status} - {evidence_words(item.evidence)}")
    if report.verdict == "findings":
        out.append(f"{len(report.findings)} finding(s)")
    elif report.verdict == "unverified":
        out.append("unverified (MACs not checked)")
    else:
        out.append("verified: no findings")
    return "\n".join(out) + "\n"
