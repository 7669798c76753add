"""The audit report as one static HTML page: what was checked, the verdict, every send's
timeline coloured by status with its findings, and the open items and resolutions.

The page runs no scripts and loads nothing (inline CSS under a strict Content-Security-Policy).
Every interpolated value is escaped: findings' details and an export's fields are untrusted.
The page is built in one pass over the report (no sorting of sends), so its time and size
are linear in the report's; past `DRAWN_PER_STATUS` quiet sends of one status, timelines are
counted rather than drawn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from html import escape
from typing import Final, TypeVar

from ledger.audit.checks import Finding
from ledger.audit.manifest import Manifest
from ledger.audit.report import (
    AuditReport,
    Checked,
    OpenItem,
    checked_lines,
    duration,
    evidence_words,
)
from ledger.audit.show import iso_ms
from ledger.audit.summary import SendSteps, Step

T = TypeVar("T")
CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
DRAWN_PER_STATUS: Final = 200  # timelines drawn per status, besides sends a person must see
STATUS_ORDER: Final = (
    "corrupt", "unknown", "sending", "rejected", "expired", "prepared", "accepted",
)  # fmt: skip

# Each event type's label on the timeline and the colour class of its phase.
STEP_LABELS: Final[dict[str, tuple[str, str]]] = {
    "prepared": ("prepared", "prepare"),
    "approval_requested": ("approval asked", "note"),
    "approval_refused": ("not approved", "note"),
    "approved": ("approved", "prepare"),
    "claimed": ("claimed", "claim"),
    "dispatch_queued": ("queued", "claim"),
    "dispatch_aborted": ("aborted", "rejected"),
    "smtp_attempt_started": ("attempt", "attempt"),
    "smtp_commit_point": ("commit", "commit"),
    "smtp_accepted": ("accepted", "accepted"),
    "smtp_rejected": ("rejected", "rejected"),
    "smtp_outcome_unknown": ("outcome unknown", "unknown"),
    "sent_filing_started": ("Sent filing", "filing"),
    "sent_filing_succeeded": ("Sent filed", "filing"),
    "sent_filing_failed": ("Sent filing failed", "rejected"),
    "expired": ("expired", "expired"),
    "recovery_classified": ("recovery", "recovery"),
    "rollback_quarantined": ("quarantined", "corrupt"),
    "confirm_refused": ("confirm refused", "note"),
    "duplicate_confirm": ("confirm repeated", "note"),
    "late_outcome_observed": ("late outcome", "note"),
    "operator_resolution": ("resolution", "resolution"),
    "outcome_evidence": ("Sent copy found", "accepted"),
}

_SOURCES: Final = {"redis": "the ledger in Redis", "export": "an export file"}
_CSS: Final = """
:root{color-scheme:light;--accepted:#1a7f37;--rejected:#cf222e;--unknown:#bc4c00;
--sending:#0969da;--prepared:#57606a;--expired:#8c959f;--corrupt:#8250df;--line:#d0d7de}
*{box-sizing:border-box}
body{margin:0;padding:14px 18px;background:#f6f8fa;color:#1f2328;
font:13px/1.45 system-ui,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto}
h1{font-size:19px;margin:0}
h2{font-size:12px;margin:16px 0 6px;text-transform:uppercase;letter-spacing:.05em;color:#57606a}
code,time{font:12px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
a{color:inherit}
.top{display:flex;align-items:center;gap:12px;flex-wrap:wrap}
#verdict{margin:0;padding:3px 12px;border-radius:999px;font-weight:700;color:#fff}
.v-verified{background:var(--accepted)}.v-unverified{background:#9a6700}
.v-findings{background:var(--rejected)}
.sub{margin:4px 0 0;color:#57606a}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:10px}
.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:8px 12px}
.card h2{margin-top:2px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dt{color:#57606a}dd{margin:0}
.good::before{content:"\\2713  ";color:var(--accepted);font-weight:700}
.warn::before{content:"!  ";color:#9a6700;font-weight:700}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eaeef2;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
.rules{margin:0;padding:0;list-style:none}
.chips{margin:6px 0 0;padding:0;list-style:none;display:flex;gap:6px;flex-wrap:wrap}
.chip,.badge{display:inline-block;padding:0 8px;border-radius:999px;color:#fff;
font-size:12px;font-weight:600;background:#6e7781}
.s-accepted{--status:var(--accepted)}.s-rejected{--status:var(--rejected)}
.s-unknown{--status:var(--unknown)}.s-sending{--status:var(--sending)}
.s-prepared{--status:var(--prepared)}.s-expired{--status:var(--expired)}
.s-corrupt{--status:var(--corrupt)}.s-other{--status:#6e7781}.g-open{--status:#9a3412}
.chip[class*=" s-"],.badge[class*=" s-"],.chip.g-open{background:var(--status)}
.send{background:#fff;border:1px solid var(--line);border-left:5px solid var(--status,#6e7781);
border-radius:6px;padding:6px 10px;margin:6px 0}
.send>p{margin:2px 0}
.meta{color:#57606a}
.why{color:#9a3412;font-weight:600}
.resolved{color:#5b21b6}
.steps{list-style:none;margin:5px 0 2px;padding:0;display:flex;flex-wrap:wrap;gap:4px 0}
.step{position:relative;display:flex;flex-direction:column;padding:2px 8px;border-radius:4px;
border:1px solid transparent;min-width:88px;background:#eaeef2}
.step+.step{margin-left:18px}
.step+.step::before{content:"\\2192";position:absolute;left:-15px;top:7px;color:#8c959f}
.step b{font-size:12px;font-weight:600}
.step time{font-size:11px;color:#57606a}
.k-prepare{background:#eaeef2}.k-claim{background:#ddf4ff}.k-attempt{background:#b6e3ff}
.k-commit{background:#fff1c2}.k-accepted{background:#dafbe1}.k-rejected{background:#ffebe9}
.k-unknown{background:#ffdfb6}.k-filing{background:#d1f0ec}.k-expired{background:#f6f8fa}
.k-recovery{background:#e2e8f0}.k-resolution{background:#ede9fe}.k-corrupt{background:#f3e8ff}
.k-note,.k-other{background:#fff;border:1px dashed #8c959f}
.flagged{border:2px solid var(--rejected)}
.findings{margin:3px 0 0;padding:0;list-style:none;color:#a40e26}
details{margin:6px 0}
summary{font-weight:600;padding:2px 0}
.more,.none{color:#57606a;font-style:italic}
footer{margin:18px 0 4px;color:#57606a;font-size:12px}
"""


def render_html(report: AuditReport) -> str:
    """Render a report as one self-contained static HTML page (inline CSS, no scripts)."""
    verdict = verdict_text(report)
    inline = Counter(finding for send in report.sends for finding in send.findings)
    drawn = {send.pid for send in report.sends}
    out = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Send ledger audit: {escape(verdict)}</title><style>{_CSS}</style></head>"
        "<body><main>",
        _header(report, verdict),
        '<div class="cards">',
        _checked(report.checked),
    ]
    if report.manifest is not None:
        out.append(_manifest(report.manifest))
    out.append("</div>")
    out.append(_ledger_findings(_outside(report.findings, inline)))
    out.append(_timelines(report))
    opened = [(item, item.reason) for item in report.investigate]
    resolved = [(item, item.resolution) for item in report.resolved]
    out.append(_items("open-items", "Open items", "why", opened, drawn))
    out.append(_items("resolutions", "Resolutions", "resolution", resolved, drawn))
    evidenced = [(item, evidence_words(item.evidence)) for item in report.evidenced]
    out.append(_items("evidence", "Accepted by evidence", "evidence", evidenced, drawn))
    out.append(
        f"<footer>{report.events:,} event(s) in {report.streams:,} stream(s) checked in "
        f"{report.elapsed_s:.2f} s · report schema {escape(report.schema)}</footer>"
        "</main></body></html>\n"
    )
    return "".join(out)


def verdict_text(report: AuditReport) -> str:
    """Say the verdict in words: verified, unverified (MACs not checked), or N findings."""
    if report.verdict == "findings":
        count = len(report.findings)
        return f"{count} finding{'' if count == 1 else 's'}"
    if report.verdict == "unverified":
        return "unverified (MACs not checked)"
    return "verified: no findings"


def status_class(status: str) -> str:
    """The colour class of a public status (an unrecognised one gets a neutral class)."""
    return f"s-{status}" if status in STATUS_ORDER else "s-other"


def _header(report: AuditReport, verdict: str) -> str:
    checked = report.checked
    chips = "".join(
        f'<li class="chip {status_class(status)}">{escape(status)} {count:,}</li>'
        for status, count in _by_status_order(report.statuses)
    )
    return (
        '<header><div class="top"><h1>Send ledger audit</h1>'
        f'<p id="verdict" class="v-{escape(report.verdict)}">{escape(verdict)}</p></div>'
        f'<p class="sub">{escape(_SOURCES.get(checked.source, checked.source))} as of '
        f"<time>{escape(checked.as_of)}</time> · {report.streams:,} send(s), "
        f"{report.events:,} event(s), {report.index_entries:,} index entr(ies)</p>"
        f'<ul class="chips">{chips}</ul>'
        f'<nav class="sub">go to <a href="#timelines">timelines</a> · '
        f'<a href="#open-items">open items ({len(report.investigate):,})</a> · '
        f'<a href="#resolutions">resolutions ({len(report.resolved):,})</a> · '
        f'<a href="#evidence">accepted by evidence ({len(report.evidenced):,})</a></nav></header>'
    )


def _by_status_order(statuses: dict[str, T]) -> list[tuple[str, T]]:
    """The entries in STATUS_ORDER, then any other status in the order met."""
    known = [(status, statuses[status]) for status in STATUS_ORDER if status in statuses]
    return known + [(s, n) for s, n in statuses.items() if s not in STATUS_ORDER]


def _checked(checked: Checked) -> str:
    """What was checked, in the words of the text report (the rules one to a line)."""
    marks = {
        "MACs": "good" if checked.macs == "checked" else "warn",
        "completeness": "warn" if checked.completeness == "not_checked" else "good",
    }
    rows = []
    for line in checked_lines(checked):
        label, _, words = line.partition(": ")
        mark = f' class="{marks[label]}"' if label in marks else ""
        if label == "rules":
            items = "".join(f"<li>{escape(rule)}</li>" for rule in words.split("; "))
            rows.append(f'<dt>rules</dt><dd><ul class="rules">{items}</ul></dd>')
        else:
            rows.append(f"<dt>{escape(label)}</dt><dd{mark}>{escape(words)}</dd>")
    return (
        '<section id="checked" class="card"><h2>What was checked</h2>'
        f"<dl>{''.join(rows)}</dl></section>"
    )


def when(ms: int) -> str:
    """Render epoch milliseconds as UTC, or the bare number when no calendar date fits."""
    try:
        return iso_ms(ms)
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms"


def _manifest(manifest: Manifest) -> str:
    until = when(manifest.until_ms) if manifest.until_ms is not None else "the export time"
    rows = [
        ("namespace", manifest.namespace),
        ("store ID", manifest.store_id or "(none)"),
        ("exported", when(manifest.exported_ms)),
        ("range", f"{when(manifest.since_ms) if manifest.since_ms else 'the start'} to {until}"),
        ("sends", manifest.pid or "all"),
        ("streams", f"{manifest.streams:,}"),
        ("index entries", f"{manifest.index_entries:,}"),
        ("sealed under", f"key ID {manifest.mac_key_id}" if manifest.mac_key_id else "no key"),
        ("recovery grace", duration(manifest.rules.recovery_grace_ms)),
        ("retention", duration(manifest.rules.retention_ms)),
        ("format", str(manifest.format)),
    ]
    body = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    return f'<section id="manifest" class="card"><h2>Export manifest</h2><dl>{body}</dl></section>'


def _outside(findings: Iterable[Finding], inline: Counter[Finding]) -> list[Finding]:
    """The findings no drawn timeline shows: the ledger's own, and index findings of any send."""
    left = inline.copy()
    outside = []
    for finding in findings:
        if left[finding] > 0:
            left[finding] -= 1
        else:
            outside.append(finding)
    return outside


def _ledger_findings(findings: list[Finding]) -> str:
    if not findings:
        return ""
    rows = "".join(
        f"<tr><td>{escape(_where(f))}</td><td><code>{escape(f.kind)}</code></td>"
        f"<td>{escape(f.detail)}</td></tr>"
        for f in findings
    )
    title = "Ledger-wide" if all(not f.pid for f in findings) else "Ledger-wide and index"
    return (
        f'<section id="ledger-findings"><h2>{title} findings</h2>'
        f"<table><tr><th>where</th><th>kind</th><th>detail</th></tr>{rows}</table></section>"
    )


def _where(finding: Finding) -> str:
    if finding.pid:
        return f"{finding.pid} seq {finding.seq}" if finding.seq else finding.pid
    return f"export line {finding.seq}" if finding.seq else "ledger"


def _timelines(report: AuditReport) -> str:
    out = ['<section id="timelines"><h2>Timelines</h2>']
    if not report.sends:
        made = "no sends" if not report.streams else "this report was made without timelines"
        out.append(f'<p class="none">{made}</p>')
    open_items, quiet = _grouped(report.sends)
    if open_items:
        out.append(_group("open", "Open items: a person must look at these", open_items, 0))
    for status, sends in quiet:
        out.append(_group(status, status, sends, DRAWN_PER_STATUS))
    out.append("</section>")
    return "".join(out)


def _grouped(
    sends: list[SendSteps],
) -> tuple[list[SendSteps], list[tuple[str, list[SendSteps]]]]:
    """The open items (by status), then the other sends by status, in one pass (no sort)."""
    open_by: dict[str, list[SendSteps]] = {}
    quiet_by: dict[str, list[SendSteps]] = {}
    for send in sends:
        (open_by if send.investigate else quiet_by).setdefault(send.status, []).append(send)
    open_items = [send for _, group in _by_status_order(open_by) for send in group]
    return open_items, _by_status_order(quiet_by)


def _group(name: str, title: str, sends: list[SendSteps], cap: int) -> str:
    """One foldable group; past `cap` (0: none) quiet sends are counted, not drawn."""
    colour = "g-open" if name == "open" else status_class(name)
    out = [
        f'<details open id="group-{escape(name)}" class="group">'
        f'<summary>{escape(title)} <span class="chip {colour}">{len(sends):,}</span></summary>'
    ]
    quiet_drawn = left_out = 0
    for send in sends:
        if cap and not (send.findings or send.resolution):
            if quiet_drawn >= cap:
                left_out += 1
                continue
            quiet_drawn += 1
        out.append(_send(send))
    if left_out:
        out.append(
            f'<p class="more">{left_out:,} more {escape(name)} send(s) without findings not '
            "drawn (their count is above); <code>angelos ledger show PREPARED_ID</code> tells "
            "any one's story</p>"
        )
    out.append("</details>")
    return "".join(out)


def _send(send: SendSteps) -> str:
    pid = escape(send.pid)
    stage = " · ".join(
        f"{k} {escape(v)}" for k, v in (("stage", send.stage), ("state", send.state)) if v
    )
    out = [
        f'<article id="send-{pid}" class="send {status_class(send.status)}">'
        f'<p><span class="badge {status_class(send.status)}">{escape(send.status)}</span> '
        f'<code>{pid}</code> <span class="meta">{stage}</span></p>'
    ]
    if send.investigate:
        out.append(f'<p class="why">investigate: {escape(send.investigate)}</p>')
    if send.resolution:
        out.append(f'<p class="resolved">resolved by a person: {escape(send.resolution)}</p>')
    if send.evidence:
        out.append(f'<p class="resolved">{escape(evidence_words(send.evidence))}</p>')
    flagged = {finding.seq for finding in send.findings}
    day = when(send.steps[0].srv_ms)[:11] if send.steps else ""
    out.append('<ol class="steps">')
    out.extend(  # the first step shows its date, the others only the time on the same day
        _step(step, step.seq in flagged, day if n else "") for n, step in enumerate(send.steps)
    )
    out.append("</ol>")
    if send.findings:
        out.append('<ul class="findings">')
        out.extend(
            f"<li>{'seq ' + str(f.seq) if f.seq else 'stream'}: <code>{escape(f.kind)}</code> "
            f"\u2014 {escape(f.detail)}</li>"
            for f in send.findings
        )
        out.append("</ul>")
    out.append("</article>")
    return "".join(out)


def _step(step: Step, flagged: bool, day: str) -> str:
    label, kind = STEP_LABELS.get(step.type, (step.type, "other"))
    moment = when(step.srv_ms)
    shown = moment[11:] if day and moment.startswith(day) and len(moment) > 11 else moment
    mark = " flagged" if flagged else ""
    return (
        f'<li class="step k-{kind}{mark}" title="seq {step.seq}: {escape(step.type)}">'
        f'<b>{escape(label)}</b><time datetime="{escape(moment)}">{escape(shown)}</time></li>'
    )


def _items(
    section: str, title: str, column: str, rows: list[tuple[OpenItem, str]], drawn: set[str]
) -> str:
    """A table of sends with one column of words: why they are open, or how they were resolved."""
    out = [f'<section id="{section}"><h2>{escape(title)}</h2>']
    if not rows:
        out.append('<p class="none">none</p></section>')
        return "".join(out)
    out.append(
        f"<table><tr><th>prepared_id</th><th>status</th><th>stage</th><th>{column}</th></tr>"
    )
    for item, said in rows:
        pid = escape(item.prepared_id)
        cell = f"<code>{pid}</code>"
        if item.prepared_id in drawn:
            cell = f'<a href="#send-{pid}">{cell}</a>'
        out.append(
            f'<tr><td>{cell}</td><td><span class="badge {status_class(item.status)}">'
            f"{escape(item.status)}</span></td><td>{escape(item.stage)}</td>"
            f"<td>{escape(said)}</td></tr>"
        )
    out.append("</table></section>")
    return "".join(out)
