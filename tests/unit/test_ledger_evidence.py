"""Evidence from the provider's Sent copy, as pure functions: when recovery searches, which copy
it names, and what verify and show make of the recorded event."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET, Struct

from ledger.audit.checks import AuditRules, audit_stream
from ledger.audit.html import render_html
from ledger.audit.report import Checked, build_report, render_text
from ledger.audit.show import conclusion, meaning, render, timeline
from ledger.audit.summary import LedgerAudit
from ledger.chain import verified_events
from ledger.dispatch.evidence import (
    SEARCH_SCHEDULE_MS,
    evidence_from,
    first_search_ms,
    next_search_ms,
)
from ledger.lifecycle import Lifecycle, fold
from schemas.ledger_events import Claimed, EventData, OutcomeEvidence
from support.ledger import (
    ATTEMPT,
    COMMIT,
    EVIDENCE,
    QUARANTINED_PREPARATION,
    RECOVERED_UNKNOWN,
    T0,
    UNKNOWN,
    chain,
    claimed,
    prepared,
)

HOUR = 3_600_000
GRACE = 900_000
SUBMITTED = COMMIT.raw_sha256


class Copy(Struct, frozen=True):
    """A copy as a finder reports it."""

    folder: str
    uid_validity: int
    uid: int
    sha256: str | None
    graph_id: str = ""


def unknown_send(*tail: EventData, claim: Claimed | None = None) -> list[EventData]:
    return [prepared(), claim or claimed(), ATTEMPT, COMMIT, UNKNOWN, *tail]


def fold_events(items: list[EventData]) -> Lifecycle:
    entries = chain(items, srv_ms=[T0 + n for n in range(1, len(items) + 1)])
    return fold(verified_events(entries[0].pid, entries), [e.srv_ms for e in entries])


class TestWhenRecoverySearches:
    def test_the_first_search_is_due_a_grace_after_the_claim(self) -> None:
        lifecycle = fold_events(unknown_send())
        assert T0 + 2 + GRACE == first_search_ms(lifecycle, GRACE)  # the claim is entry 2

    def test_a_longer_grace_recorded_at_the_claim_binds(self) -> None:
        recorded = msgspec.structs.replace(claimed(), recovery_grace_ms=2 * GRACE)
        lifecycle = fold_events(unknown_send(claim=recorded))
        assert T0 + 2 + 2 * GRACE == first_search_ms(lifecycle, GRACE)

    def test_a_preparation_quarantined_before_any_claim_counts_from_the_quarantine(self) -> None:
        lifecycle = fold_events([prepared(), QUARANTINED_PREPARATION])
        assert T0 + 2 + GRACE == first_search_ms(lifecycle, GRACE)

    @pytest.mark.parametrize(
        "items",
        [
            [prepared()],
            [prepared(), claimed(), ATTEMPT, COMMIT],
            unknown_send(EVIDENCE),
        ],
    )
    def test_a_send_that_is_not_unknown_awaits_no_search(self, items: list[EventData]) -> None:
        assert first_search_ms(fold_events(items), GRACE) is None

    def test_searches_back_off_and_stop_a_day_after_the_first(self) -> None:
        first = T0
        tries = [first]
        while (upcoming := next_search_ms(first, tries[-1])) is not None:
            tries.append(upcoming)
        assert [first + offset for offset in SEARCH_SCHEDULE_MS] == tries
        assert len(tries) <= 8 and tries[-1] - first <= 24 * HOUR
        assert all(b - a < c - b for a, b, c in zip(tries, tries[1:], tries[2:], strict=False))

    def test_a_search_that_ran_late_is_followed_by_the_next_scheduled_one(self) -> None:
        assert T0 + HOUR == next_search_ms(T0, T0 + 20 * 60_000)
        assert next_search_ms(T0, T0 + 24 * HOUR) is None


class TestWhichCopyIsNamed:
    def test_no_copy_is_no_evidence(self) -> None:
        assert evidence_from([], COMMIT) is None

    def test_a_copy_with_the_submitted_bytes_is_named_identical(self) -> None:
        copies = [Copy("Sent", 7, 40, "cd" * 32), Copy("Sent", 7, 41, SUBMITTED)]
        assert OutcomeEvidence(
            source="sent_folder", uid_validity=7, uid=41, sha256=SUBMITTED, identical=True,
            copies=2,
        ) == evidence_from(copies, COMMIT)  # fmt: skip

    def test_a_copy_with_other_bytes_still_counts_with_identical_false(self) -> None:
        data = evidence_from([Copy("Sent", 9, 3, "cd" * 32)], COMMIT)
        assert data is not None and (False, "cd" * 32, 1) == (
            data.identical, data.sha256, data.copies
        )  # fmt: skip

    def test_a_copy_too_large_to_hash_counts_without_a_hash(self) -> None:
        data = evidence_from([Copy("Sent", 9, 3, None)], COMMIT)
        assert data is not None and (False, UNSET) == (data.identical, data.sha256)

    def test_without_a_commit_point_nothing_is_identical(self) -> None:
        data = evidence_from([Copy("Sent", 9, 3, SUBMITTED)], None)
        assert data is not None and data.identical is False

    def test_the_folder_name_is_never_recorded(self) -> None:
        data = evidence_from([Copy("Private project X", 9, 3, SUBMITTED)], COMMIT)
        assert b"Private" not in msgspec.json.encode(data)

    def test_a_graph_copy_is_located_by_its_id_alone(self) -> None:
        data = evidence_from([Copy("AAMkSent", 0, 0, "cd" * 32, graph_id="AAMkAGI2-x_1=")], COMMIT)
        assert OutcomeEvidence(
            source="sent_folder", graph_id="AAMkAGI2-x_1=", sha256="cd" * 32, identical=False,
            copies=1,
        ) == data  # fmt: skip
        assert data is not None and "Microsoft Graph message AAMkAGI2-x_1=" == data.where


class TestTheCopyIsLocatedOnce:
    @pytest.mark.parametrize(
        "where",
        [{}, {"uid": 3}, {"uid_validity": 9}, {"uid_validity": 9, "uid": 3, "graph_id": "AAMk"},
         {"uid": 3, "graph_id": "AAMk"}],
    )  # fmt: skip
    def test_uids_together_or_a_graph_id_alone(self, where: dict[str, object]) -> None:
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(
                {"source": "sent_folder", "identical": False, "copies": 1, **where},
                OutcomeEvidence,
            )

    def test_a_graph_id_outside_its_alphabet_is_refused(self) -> None:
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(
                {"source": "sent_folder", "identical": False, "copies": 1, "graph_id": "a/b"},
                OutcomeEvidence,
            )


class TestTheAuditReadsIt:
    RULES = AuditRules(as_of_ms=T0 + 10_000)

    def test_verify_accepts_the_evidence_and_asks_no_one_to_investigate(self) -> None:
        entries = chain(unknown_send(EVIDENCE))
        audit = audit_stream(entries[0].pid, entries, self.RULES)
        assert ([], "accepted", "", "identical", "EVIDENCED") == (
            audit.findings, audit.status, audit.investigate, audit.evidence, audit.state
        )  # fmt: skip

    def test_verify_finds_an_identical_claim_the_hashes_contradict(self) -> None:
        forged = msgspec.structs.replace(EVIDENCE, sha256="cd" * 32)  # says identical anyway
        entries = chain(unknown_send(forged))
        audit = audit_stream(entries[0].pid, entries, self.RULES)
        assert ["evidence_mismatch"] == [finding.kind for finding in audit.findings]

    def test_verify_finds_other_bytes_claimed_for_the_submitted_hash(self) -> None:
        modest = msgspec.structs.replace(EVIDENCE, identical=False)
        entries = chain(unknown_send(modest))
        audit = audit_stream(entries[0].pid, entries, self.RULES)
        assert ["evidence_mismatch"] == [finding.kind for finding in audit.findings]

    def test_show_names_the_copy_and_concludes_accepted(self) -> None:
        entries = chain([prepared(), claimed(), ATTEMPT, COMMIT, RECOVERED_UNKNOWN, EVIDENCE])
        audit = audit_stream(entries[0].pid, entries, self.RULES)
        text = render(timeline(audit, entries))
        assert "status: accepted / acknowledgement (written by recovery)" in text
        assert "UIDVALIDITY 7, UID 43, identical to raw_sha256" in text
        assert meaning(EVIDENCE) in text
        lifecycle = fold_events([prepared(), claimed(), ATTEMPT, COMMIT, UNKNOWN, EVIDENCE])
        assert "proves it accepted the message" in conclusion(lifecycle)

    def test_show_says_when_the_provider_rewrote_the_bytes(self) -> None:
        rewritten = OutcomeEvidence(
            source="sent_folder", uid_validity=7, uid=44, sha256="cd" * 32, identical=False,
            copies=1,
        )  # fmt: skip
        assert "other bytes (the provider rewrote them)" in meaning(rewritten)


class TestTheReports:
    RULES = AuditRules(as_of_ms=T0 + 10_000)

    def report(self) -> tuple[str, str, dict[str, object]]:
        summary = LedgerAudit(keep_steps=True)
        for pid, items in (("1" * 32, unknown_send(EVIDENCE)), ("2" * 32, unknown_send())):
            entries = chain(items, pid=pid)
            summary.add(audit_stream(pid, entries, self.RULES), entries)
        checked = Checked(
            source="redis", as_of="", as_of_ms=self.RULES.as_of_ms, macs="unsealed",
            completeness="index",
        )  # fmt: skip
        report = build_report(summary, checked)
        return render_text(report), render_html(report), msgspec.to_builtins(report)

    def test_the_text_report_lists_the_send_as_accepted_by_evidence(self) -> None:
        text, _, _ = self.report()
        line = f"EVIDENCE {'1' * 32}: accepted - outcome lost, the provider's own Sent copy"
        assert f"{line} found (identical bytes)" in text
        assert f"INVESTIGATE {'2' * 32}: unknown" in text
        assert f"INVESTIGATE {'1' * 32}" not in text

    def test_the_json_report_has_an_evidenced_list(self) -> None:
        _, _, data = self.report()
        assert [("1" * 32, "accepted", "identical")] == [
            (item["prepared_id"], item["status"], item["evidence"])
            for item in data["evidenced"]  # type: ignore[attr-defined]
        ]

    def test_the_html_report_has_a_section_and_a_note_on_the_timeline(self) -> None:
        _, page, _ = self.report()
        start = page.index('<section id="evidence"')
        assert "1" * 32 in page[start : page.index("</section>", start)]
        assert "Sent copy found" in page  # the step's label on the timeline
