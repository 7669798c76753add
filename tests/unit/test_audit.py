"""The auditor's pure checks: chain, state machine, rules, index, verdicts,
the human timeline, and export/replay of JSON Lines."""

from __future__ import annotations

import msgspec
import pytest

from ledger.audit.checks import AuditRules, audit_stream, index_findings, missing_stream_findings
from ledger.audit.export import ExportFile, MissingStream, read_export, replay_export
from ledger.audit.show import conclusion, render, timeline
from ledger.dispatch.recovery import classify, verdict_of
from ledger.lifecycle import fold
from ledger.store.bulk import IndexEntry
from schemas.ledger import LedgerEntry, decode_event
from schemas.ledger_events import Claimed
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    DIGEST,
    FILING_STARTED,
    LATE,
    PID,
    RECOVERED_NOT_ATTEMPTED,
    RECOVERED_NOT_SUBMITTED,
    RECOVERED_UNKNOWN,
    T0,
    UNKNOWN,
    chain,
    claimed,
    prepared,
)

KEY = bytes(range(32))
GRACE = 1_000
RULES = AuditRules(grace_ms=GRACE, as_of_ms=T0 + 10_000, retention_ms=3_600_000)
SENT = [prepared(), claimed(), ATTEMPT, COMMIT, ACCEPTED]


def late_times(n: int, recovery_at: int) -> list[int]:
    """Server times where the last entry is written `recovery_at` ms after the claim."""
    times = [T0 + k for k in range(1, n + 1)]
    times[-1] = times[1] + recovery_at
    return times


def tamper(entry: LedgerEntry, old: str, new: str) -> LedgerEntry:
    assert old in entry.e
    return msgspec.structs.replace(entry, e=entry.e.replace(old, new, 1))


class TestSoundStreams:
    def test_a_sound_accepted_send_verifies_and_projects_accepted(self) -> None:
        audit = audit_stream(PID, chain(SENT), RULES)
        assert ([], "accepted", "acknowledgement", "") == (
            audit.findings, audit.status, audit.stage, audit.investigate
        )  # fmt: skip

    def test_a_recovered_send_verifies_when_recovery_waited_the_grace(self) -> None:
        items = [prepared(), claimed(), RECOVERED_NOT_ATTEMPTED]
        audit = audit_stream(PID, chain(items, srv_ms=late_times(3, GRACE)), RULES)
        assert ([], "rejected", "not_attempted", True) == (
            audit.findings, audit.status, audit.stage, audit.recovered
        )  # fmt: skip

    def test_with_the_key_every_mac_verifies(self) -> None:
        audit = audit_stream(PID, chain(SENT, key=KEY), msgspec.structs.replace(RULES, key=KEY))
        assert [] == audit.findings

    def test_a_different_key_fails_every_entry(self) -> None:
        other = msgspec.structs.replace(RULES, key=bytes(32))
        audit = audit_stream(PID, chain(SENT, key=KEY), other)
        assert [1, 2, 3, 4, 5] == [f.seq for f in audit.findings if f.kind == "mac_mismatch"]


class TestTampering:
    @pytest.mark.parametrize("seq", [1, 2, 3, 4, 5])
    def test_one_changed_byte_in_any_event_is_reported_at_its_seq(self, seq: int) -> None:
        entries = chain(SENT)
        entry = entries[seq - 1]
        flipped = entry.e[:-3] + ("0" if entry.e[-3] != "0" else "1") + entry.e[-2:]
        entries[seq - 1] = msgspec.structs.replace(entry, e=flipped)
        audit = audit_stream(PID, entries, RULES)
        assert "corrupt" == audit.status
        assert (seq, "hash_mismatch") in [(f.seq, f.kind) for f in audit.findings]
        assert {PID} == {f.pid for f in audit.findings}

    def test_a_removed_middle_entry_is_a_gap(self) -> None:
        entries = chain(SENT)
        del entries[2]
        kinds = {(f.seq, f.kind) for f in audit_stream(PID, entries, RULES).findings}
        assert (4, "id_gap") in kinds

    def test_a_rehashed_edit_still_breaks_the_next_prev(self) -> None:
        entries = chain(SENT)
        edited = tamper(entries[1], '"append_sent":false', '"append_sent":true ')
        entries[1] = msgspec.structs.replace(
            edited, e=edited.e.replace("true ", "true"), h=entries[1].h
        )
        findings = audit_stream(PID, entries, RULES).findings
        assert findings and all(f.seq >= 2 for f in findings)

    def test_an_out_of_order_lifecycle_is_an_invalid_transition(self) -> None:
        audit = audit_stream(PID, chain([prepared(), claimed(), ACCEPTED]), RULES)
        assert [(3, "invalid_transition")] == [(f.seq, f.kind) for f in audit.findings]

    def test_a_writer_clock_far_from_the_server_is_skew(self) -> None:
        entries = chain(SENT, srv_ms=[T0 + 1, T0 + 2, T0 + 3, T0 + 4, T0 + 10_000_000])
        kinds = [(f.seq, f.kind) for f in audit_stream(PID, entries, RULES).findings]
        assert [(5, "clock_skew")] == kinds


class TestRecoveryRules:
    def test_recovery_inside_the_grace_is_a_finding(self) -> None:
        items = [prepared(), claimed(), RECOVERED_NOT_ATTEMPTED]
        audit = audit_stream(PID, chain(items, srv_ms=late_times(3, GRACE - 1)), RULES)
        assert [(3, "recovery_early")] == [(f.seq, f.kind) for f in audit.findings]

    def test_recovery_must_name_the_state_it_closed(self) -> None:
        wrong = msgspec.structs.replace(RECOVERED_UNKNOWN, last_lifecycle_type="claimed")
        items = [prepared(), claimed(), ATTEMPT, COMMIT, wrong]
        audit = audit_stream(PID, chain(items, srv_ms=late_times(5, GRACE)), RULES)
        assert [(5, "recovery_mismatch")] == [(f.seq, f.kind) for f in audit.findings]

    def test_a_claim_confirming_another_digest_is_a_finding(self) -> None:
        other = Claimed(
            dispatcher_id="c3" * 16, claim_token="9" * 32, confirmed_digest="0" * 64,
            append_sent=False,
        )  # fmt: skip
        audit = audit_stream(PID, chain([prepared(), other]), RULES)
        assert [(2, "claim_digest")] == [(f.seq, f.kind) for f in audit.findings]
        assert DIGEST != other.confirmed_digest


class TestInvestigation:
    def test_unknown_outcomes_need_a_person(self) -> None:
        audit = audit_stream(PID, chain([*SENT[:4], UNKNOWN]), RULES)
        assert "outcome unknown: may have been sent" == audit.investigate

    def test_a_claim_still_sending_past_the_grace_needs_a_person(self) -> None:
        audit = audit_stream(PID, chain(SENT[:3]), RULES)
        assert ("sending", "still sending past the recovery grace") == (
            audit.status, audit.investigate
        )  # fmt: skip

    def test_a_late_outcome_needs_a_person(self) -> None:
        items = [prepared(), claimed(), ATTEMPT, COMMIT, RECOVERED_UNKNOWN, LATE]
        times = late_times(6, GRACE)
        times[4], times[5] = times[1] + GRACE, times[1] + GRACE + 1
        audit = audit_stream(PID, chain(items, srv_ms=times), RULES)
        assert (True, "late outcome observed after recovery") == (
            audit.late_outcome, audit.investigate
        )  # fmt: skip


class TestIndex:
    def index_of(self, entries: list[LedgerEntry]) -> list[IndexEntry]:
        return [IndexEntry(f"{e.srv_ms}-0", PID, e.seq, e.t, e.h) for e in entries]

    def test_every_event_indexed_once_is_consistent(self) -> None:
        entries = chain(SENT)
        assert [] == index_findings(PID, entries, self.index_of(entries), RULES)

    def test_a_missing_index_entry_and_a_deleted_tail_are_reported(self) -> None:
        entries = chain(SENT)
        index = self.index_of(entries)
        kinds = index_findings(PID, entries[:4], index[:2] + index[3:], RULES)
        assert [(3, "index_missing"), (5, "missing_entry")] == [(f.seq, f.kind) for f in kinds]

    def test_a_deleted_stream_is_reported_through_its_index_entries(self) -> None:
        index = self.index_of(chain(SENT))
        [finding] = missing_stream_findings(PID, index, RULES)
        assert ("missing_stream", 5) == (finding.kind, finding.seq)

    def test_a_stream_past_its_retention_may_be_gone(self) -> None:
        index = self.index_of(chain(SENT))
        later = msgspec.structs.replace(RULES, as_of_ms=T0 + RULES.retention_ms + 10)
        assert [] == missing_stream_findings(PID, index, later)


class TestExportReplay:
    def lines(self, entries: list[LedgerEntry]) -> list[bytes]:
        return [msgspec.json.encode(entry) for entry in entries]

    def test_an_export_replays_to_the_live_projection(self) -> None:
        export = read_export(self.lines(chain(SENT)))
        summary = replay_export(export, RULES)
        assert (True, {"accepted": 1}, 5) == (summary.ok, summary.statuses, summary.events)

    def test_one_changed_byte_in_an_export_line_is_reported_at_its_seq(self) -> None:
        lines = self.lines(chain(SENT))
        lines[2] = lines[2].replace(b"smtp.example.test", b"smtp.examplf.test")
        summary = replay_export(read_export(lines), RULES)
        assert (PID, 3, "hash_mismatch") in [(f.pid, f.seq, f.kind) for f in summary.findings]

    def test_a_removed_middle_line_is_a_gap(self) -> None:
        lines = self.lines(chain(SENT))
        del lines[1]
        summary = replay_export(read_export(lines), RULES)
        assert (PID, 3, "id_gap") in [(f.pid, f.seq, f.kind) for f in summary.findings]

    def test_unreadable_lines_and_missing_streams_are_findings(self) -> None:
        missing = MissingStream(pid=PID, seq=2, t="claimed", h="0" * 64, index_id="1-0")
        export = read_export([b"{not json", msgspec.json.encode(missing)])
        assert isinstance(export, ExportFile)
        kinds = [f.kind for f in replay_export(export, RULES).findings]
        assert ["bad_line", "missing_stream"] == kinds

    def test_non_ascii_bytes_survive_the_export_round_trip(self) -> None:
        entries = chain(SENT)
        entries[0] = msgspec.structs.replace(entries[0], e=entries[0].e + "\xe9")
        export = read_export(self.lines(entries))
        assert entries[0].e == export.entries[PID][0].e


class TestTimeline:
    def test_the_conclusions_say_what_the_markers_prove(self) -> None:
        def said(items: list[object]) -> str:
            events = [decode_event(e.e) for e in chain(items)]  # type: ignore[arg-type]
            return conclusion(fold(events, None))

        base = [prepared(), claimed()]
        assert "provably never sent" in said([*base, RECOVERED_NOT_ATTEMPTED])
        assert "attempt marker present, commit point absent: the message was provably not " \
            "submitted" == said([*base, ATTEMPT, RECOVERED_NOT_SUBMITTED])  # fmt: skip
        assert "may have been accepted" in said([*base, ATTEMPT, COMMIT, RECOVERED_UNKNOWN])
        assert "acceptance is not delivery" in said(SENT)

    def test_the_rendered_timeline_has_every_event_time_and_actor(self) -> None:
        entries = chain([prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED])
        view = timeline(audit_stream(PID, entries, RULES), entries)
        text = render(view)
        assert 5 == len(view.events)
        for event in view.events:
            assert event.server_time in text and event.actor in text and event.type in text
        assert "Sent copy requested" in text and "canary" not in text


class TestClassify:
    @pytest.mark.parametrize(
        ("items", "verdict"),
        [
            ([prepared(), claimed()], "rejected/not_attempted"),
            ([prepared(), claimed(), ATTEMPT], "rejected/interrupted"),
            ([prepared(), claimed(), ATTEMPT, COMMIT], "unknown/acknowledgement"),
            (
                [prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED, FILING_STARTED],
                "accepted/sent_filing_unknown",
            ),
        ],
    )
    def test_recovery_decides_from_the_last_durable_event(
        self, items: list[object], verdict: str
    ) -> None:
        entries = chain(items)  # type: ignore[arg-type]
        lifecycle = fold([decode_event(e.e) for e in entries], [e.srv_ms for e in entries])
        data = classify(lifecycle, T0 + 10_000)
        assert data is not None and verdict == verdict_of(data)

    def test_a_closed_send_is_not_recoverys_business(self) -> None:
        entries = chain(SENT)
        lifecycle = fold([decode_event(e.e) for e in entries], [e.srv_ms for e in entries])
        assert classify(lifecycle, T0) is None
