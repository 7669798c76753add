"""The auditor's HTML page: static (no scripts, nothing loaded), escaped, a timeline per send
coloured by status with its findings, the open items and resolutions, linear in its input."""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from ledger.audit.checks import AuditRules, Finding, audit_stream
from ledger.audit.html import CSP, DRAWN_PER_STATUS, STATUS_ORDER, STEP_LABELS, render_html
from ledger.audit.manifest import ExportRules, Manifest
from ledger.audit.report import AuditReport, Checked, build_report, rules_used
from ledger.audit.show import iso_ms
from ledger.audit.summary import LedgerAudit, SendSteps, Step
from schemas.ledger import LedgerEntry
from schemas.ledger_events import EVENT_TYPES, EventData
from support.ledger import (
    ACCEPTED,
    APPROVAL_ASKED,
    APPROVAL_DECLINED,
    APPROVED_BY_ELICITATION,
    ATTEMPT,
    COMMIT,
    EXPIRED,
    FILING_SAVED,
    FILING_STARTED,
    NEEDS_APPROVAL,
    REJECTED_ACK,
    RESOLVED,
    T0,
    UNKNOWN,
    chain,
    claimed,
    prepared,
)
from support.linear import LINEAR_BOUND, growth

RULES = AuditRules(grace_ms=1_000, as_of_ms=T0 + 10_000, retention_ms=3_600_000)
SENT: list[EventData] = [prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED]
STORIES: dict[str, list[EventData]] = {
    "accepted": [*SENT, FILING_STARTED, FILING_SAVED],
    "rejected": [prepared(), claimed(), ATTEMPT, COMMIT, REJECTED_ACK],
    "unknown": [prepared(), claimed(), ATTEMPT, COMMIT, UNKNOWN],
    "resolved": [prepared(), claimed(), ATTEMPT, COMMIT, UNKNOWN, RESOLVED],
    "sending": [prepared(), claimed(), ATTEMPT],
    "prepared": [prepared(expires_ms=T0 + 900_000)],
    "expired": [prepared(expires_ms=T0 + 2), EXPIRED],
    "corrupt": SENT,
}
PIDS = {name: f"{n:032x}" for n, name in enumerate(STORIES, start=1)}


def stream(name: str) -> list[LedgerEntry]:
    """The stored entries of one story; the corrupt one has a changed byte in seq 3."""
    entries = chain(STORIES[name], pid=PIDS[name])
    if name == "corrupt":
        changed = entries[2].e.replace("tls", "tlx", 1)
        entries[2] = msgspec.structs.replace(entries[2], e=changed)
    return entries


def report_of(
    names: Sequence[str] = tuple(STORIES), manifest: Manifest | None = None
) -> AuditReport:
    """The report `verify --html` makes of these stories (steps kept)."""
    summary = LedgerAudit(keep_steps=True)
    for name in names:
        entries = stream(name)
        summary.add(audit_stream(PIDS[name], entries, RULES), entries)
    checked = Checked(
        source="redis" if manifest is None else "export", as_of=iso_ms(RULES.as_of_ms),
        as_of_ms=RULES.as_of_ms, macs="unsealed", completeness="index",
        rules=rules_used(RULES, summary),
    )  # fmt: skip
    return build_report(summary, checked, manifest)


def section(page: str, name: str) -> str:
    """The HTML of one `<section id=name>`."""
    start = page.index(f'<section id="{name}"')
    return page[start : page.index("</section>", start)]


def article(page: str, pid: str) -> str:
    """The HTML of one send's timeline."""
    start = page.index(f'<article id="send-{pid}"')
    return page[start : page.index("</article>", start)]


class TestStatic:
    def test_the_page_has_no_script_and_loads_nothing(self) -> None:
        page = render_html(report_of())
        assert "<script" not in page.lower()
        assert not re.search(r"\b(src|srcset|action)\s*=", page)
        assert not re.search(r"(href|url)\s*[=(]\s*[\"']?(https?:|//|data:)", page)
        assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
        assert "default-src 'none'; style-src 'unsafe-inline'; img-src data:" == CSP

    def test_a_hostile_finding_detail_is_escaped(self) -> None:
        report = report_of(["accepted"])
        report.findings.append(
            Finding("", 7, "bad_line", '</td><script>alert("x")</script><img src=x onerror=1>')
        )
        page = render_html(report)
        assert "<script" not in page and "<img" not in page
        assert "&lt;/td&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page

    def test_an_exports_hostile_pid_and_event_type_are_escaped(self) -> None:
        report = report_of(["accepted"])
        report.sends.append(
            SendSteps(
                pid='"><b onmouseover=x>', status="<i>", stage="", state="", investigate="",
                resolution="", steps=[Step(1, "<svg onload=x>", 10**18)], findings=[],
            )
        )  # fmt: skip
        page = render_html(report)
        assert "<svg" not in page and "<b onmouseover" not in page and "<i>" not in page
        assert 'id="send-&quot;&gt;&lt;b onmouseover=x&gt;"' in page
        assert "1000000000000000000 ms" in page  # no calendar date that far: the number


class TestVerdict:
    def test_a_clean_ledger_is_verified(self) -> None:
        page = render_html(report_of(["accepted", "rejected"]))
        assert '<p id="verdict" class="v-verified">verified: no findings</p>' in page

    def test_a_ledger_with_findings_says_how_many(self) -> None:
        page = render_html(report_of(["accepted", "corrupt"]))
        assert '<p id="verdict" class="v-findings">2 findings</p>' in page

    def test_macs_not_checked_is_unverified(self) -> None:
        report = report_of(["accepted"])
        report.checked = msgspec.structs.replace(report.checked, macs="not_checked")
        report.verdict = "unverified"
        page = render_html(report)
        assert ">unverified (MACs not checked)</p>" in page
        assert '<dd class="warn">NOT checked' in section(page, "checked")

    def test_what_was_checked_names_the_macs_completeness_and_time(self) -> None:
        checked = section(render_html(report_of(["accepted"])), "checked")
        assert '<dt>MACs</dt><dd class="warn">none (the ledger has no HMAC key)</dd>' in checked
        assert '<dt>completeness</dt><dd class="good">every stream and event held' in checked
        assert f"<dt>as of</dt><dd>{iso_ms(RULES.as_of_ms)}</dd>" in checked

    def test_the_rules_applied_are_listed_with_their_sources(self) -> None:
        checked = section(render_html(report_of(["accepted"])), "checked")
        assert "<li>recovery grace 1 s (from the default)</li>" in checked
        assert "<li>clock skew 300 s (from the command line)</li>" in checked

    def test_a_replay_shows_the_exports_manifest(self) -> None:
        manifest = Manifest(
            namespace="angelos", store_id="s-1", exported_ms=T0, streams=1, index_entries=7,
            mac_key_id="k1d", rules=ExportRules(recovery_grace_ms=900_000, retention_ms=3_600_000),
        )  # fmt: skip
        shown = section(render_html(report_of(["accepted"], manifest)), "manifest")
        assert "<dt>exported</dt><dd>2027-01-15T08:00:00.000Z</dd>" in shown
        assert "<dd>key ID k1d</dd>" in shown and "<dd>900 s</dd>" in shown


class TestTimelines:
    def test_a_send_of_each_status_gets_its_colour_class(self) -> None:
        page = render_html(report_of())
        for name in STATUS_ORDER:
            assert f'<article id="send-{PIDS[name]}" class="send s-{name}">' in page
            assert f".s-{name}{{--status:var(--{name})}}" in page

    def test_each_step_is_drawn_in_order_with_its_utc_time(self) -> None:
        shown = article(render_html(report_of(["accepted"])), PIDS["accepted"])
        labels = re.findall(r"<b>([^<]*)</b>", shown)
        assert ["prepared", "claimed", "attempt", "commit", "accepted", "Sent filing",
                "Sent filed"] == labels  # fmt: skip
        assert '<time datetime="2027-01-15T08:00:00.001Z">2027-01-15T08:00:00.001Z</time>' in shown
        assert '<time datetime="2027-01-15T08:00:00.002Z">08:00:00.002Z</time>' in shown

    def test_every_event_type_has_a_label(self) -> None:
        assert EVENT_TYPES == set(STEP_LABELS)

    def test_an_approved_send_shows_the_requests_the_refusal_and_the_approval(self) -> None:
        pid = "f" * 32
        story: list[EventData] = [
            NEEDS_APPROVAL, APPROVAL_ASKED, APPROVAL_DECLINED, APPROVAL_ASKED,
            APPROVED_BY_ELICITATION, claimed(), ATTEMPT, COMMIT, ACCEPTED,
        ]  # fmt: skip
        entries = chain(story, pid=pid)
        summary = LedgerAudit(keep_steps=True)
        summary.add(audit_stream(pid, entries, RULES), entries)
        checked = Checked(
            source="redis", as_of=iso_ms(RULES.as_of_ms), as_of_ms=RULES.as_of_ms,
            macs="unsealed", completeness="index", rules=rules_used(RULES, summary),
        )  # fmt: skip
        shown = article(render_html(build_report(summary, checked, None)), pid)
        labels = re.findall(r"<b>([^<]*)</b>", shown)
        assert ["prepared", "approval asked", "not approved", "approval asked", "approved",
                "claimed", "attempt", "commit", "accepted"] == labels  # fmt: skip
        assert 'class="send s-accepted"' in shown and "flagged" not in shown
        assert '<li class="step k-prepare" title="seq 5: approved">' in shown

    def test_a_sends_findings_are_shown_in_its_timeline_and_not_at_the_top(self) -> None:
        page = render_html(report_of())
        shown = article(page, PIDS["corrupt"])
        assert "<li>seq 3: <code>hash_mismatch</code> \u2014 h is not the hash of e</li>" in shown
        assert '<li class="step k-attempt flagged"' in shown
        assert 'id="ledger-findings"' not in page

    def test_ledger_wide_findings_are_in_a_block_before_the_timelines(self) -> None:
        report = report_of(["accepted"])
        report.findings.append(Finding("", 0, "index_gap", "the index lost an entry"))
        page = render_html(report)
        block = section(page, "ledger-findings")
        assert "<td>ledger</td><td><code>index_gap</code></td>" in block
        assert page.index('id="ledger-findings"') < page.index('id="timelines"')

    def test_an_index_finding_of_a_send_is_in_the_block_too(self) -> None:
        report = report_of(["accepted"])
        report.findings.append(Finding(PIDS["accepted"], 9, "missing_entry", "index names seq 9"))
        block = section(render_html(report), "ledger-findings")
        assert "Ledger-wide and index findings" in block
        assert f"<td>{PIDS['accepted']} seq 9</td><td><code>missing_entry</code></td>" in block

    def test_open_items_come_first(self) -> None:
        page = render_html(report_of())
        opened = page.index('id="group-open"')
        assert (
            opened < page.index(f'id="send-{PIDS["unknown"]}"') < page.index('id="group-accepted"')
        )

    def test_quiet_sends_past_the_cap_are_counted_not_drawn(self) -> None:
        report = report_of(["accepted"])
        quiet = report.sends[0]
        report.sends = [
            msgspec.structs.replace(quiet, pid=f"{n:032x}") for n in range(DRAWN_PER_STATUS + 3)
        ]
        page = render_html(report)
        assert DRAWN_PER_STATUS == page.count('class="send s-accepted"')
        assert "3 more accepted send(s) without findings not drawn" in page


class TestTables:
    def test_the_open_items_table_lists_an_unknown_send(self) -> None:
        table = section(render_html(report_of()), "open-items")
        pid = PIDS["unknown"]
        assert f'<a href="#send-{pid}"><code>{pid}</code></a>' in table
        assert "outcome unknown: may have been sent" in table

    def test_the_resolutions_table_lists_the_resolved_send(self) -> None:
        page = render_html(report_of())
        table = section(page, "resolutions")
        assert PIDS["resolved"] in table and "<td>arrived</td>" in table
        assert PIDS["resolved"] not in section(page, "open-items")
        assert "resolved by a person: arrived" in article(page, PIDS["resolved"])


def many_open_sends(count: int) -> AuditReport:
    """A report of `count` unknown sends, every one open (so every timeline is drawn)."""
    report = report_of(["unknown"])
    one, item = report.sends[0], report.investigate[0]
    pids = [f"{n:032x}" for n in range(count)]
    report.sends = [msgspec.structs.replace(one, pid=pid) for pid in pids]
    report.investigate = [msgspec.structs.replace(item, prepared_id=pid) for pid in pids]
    report.findings = [Finding(pid, 1, "clock_skew", "<&>" * 10) for pid in pids]
    return report


def test_the_page_grows_linearly_with_the_sends() -> None:
    assert growth(render_html, many_open_sends, 4000) < LINEAR_BOUND
