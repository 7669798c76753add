"""The pure send_status projection."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.projection import entries_as_of, integrity_alarm, project, rfc3339_seconds
from schemas.ledger import InvalidTransition, LedgerCorrupt
from schemas.ledger_events import (
    DispatchAborted,
    EventData,
    OutcomeEvidence,
    SentFilingFailed,
    SmtpAccepted,
    SmtpOutcomeUnknown,
    SmtpRejected,
)
from support.ledger import (
    ABORTED,
    ABORTED_BEFORE_TERMINATOR,
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    DIGEST,
    DUPLICATE,
    EVIDENCE,
    EXPIRED,
    FILING_FAILED,
    FILING_SAVED,
    FILING_STARTED,
    FILING_UNKNOWN,
    LATE,
    OTHER_OWNER,
    OWNER,
    PID,
    QUARANTINED_COMMIT,
    QUARANTINED_PREPARATION,
    QUEUED,
    RECOVERED_NOT_ATTEMPTED,
    RECOVERED_NOT_SUBMITTED,
    RECOVERED_UNKNOWN,
    REFUSED,
    REJECTED_ACK,
    REJECTED_ENVELOPE,
    RESOLVED,
    SAMPLES,
    T0,
    TTL_MS,
    UNKNOWN,
    chain,
    claimed,
    prepared,
    replace_e,
)

DEADLINE = T0 + TTL_MS
NOW = T0 + 60_000
MESSAGE_ID = f"<{PID}@example.test>"
EXPIRES_AT = "2027-01-15T08:15:00Z"
STATUS_KEYS = {"status", "message_id", "expires_at", "delivery_verified", "warning"}
PHRASES = ("not delivery", "not proof of non-send", "Never automatically resend", "sending/unknown")
SENT = (prepared(), claimed(append_sent=False), ATTEMPT, COMMIT)
SENT_FILING = (prepared(), claimed(append_sent=True), ATTEMPT, COMMIT)


def status_of(items: tuple[EventData, ...] | list[EventData], now: int = NOW, **kw: object) -> dict:
    answer = project(chain(items), kw.pop("owner", OWNER), now, **kw)  # type: ignore[arg-type]
    return msgspec.json.decode(msgspec.json.encode(answer))


def smtp_rejected(stage: str, reason: str, code: int = 0) -> SmtpRejected:
    return SmtpRejected(
        stage=stage,  # type: ignore[arg-type]
        reply_code=code,
        enhanced_status="",
        network_contacted=stage != "not_attempted",
        reason=reason,  # type: ignore[arg-type]
    )


class TestPublicStates:
    def test_an_unclaimed_preparation_before_its_deadline_is_prepared(self) -> None:
        assert {
            "status": "prepared",
            "message_id": MESSAGE_ID,
            "expires_at": EXPIRES_AT,
            "delivery_verified": False,
            "warning": status_of([prepared()])["warning"],
        } == status_of([prepared()])

    @pytest.mark.parametrize(("now", "status"), [(DEADLINE - 1, "prepared"), (DEADLINE, "expired")])
    def test_an_unclaimed_preparation_expires_by_server_time(self, now: int, status: str) -> None:
        assert status == status_of([prepared()], now)["status"]

    def test_an_expired_event_projects_expired_without_a_stage(self) -> None:
        items = [prepared(expires_ms=T0 + 2), EXPIRED]
        answer = status_of(items)
        assert ("expired", STATUS_KEYS) == (answer["status"], set(answer))

    @pytest.mark.parametrize("length", [2, 3, 4])
    def test_claimed_attempting_and_committed_are_sending_without_a_stage(
        self, length: int
    ) -> None:
        answer = status_of(SENT[:length], now=DEADLINE + 1)  # the deadline no longer matters
        assert ("sending", STATUS_KEYS) == (answer["status"], set(answer))

    def test_accepted_shows_the_acknowledgement_stage(self) -> None:
        answer = status_of([*SENT, ACCEPTED])
        assert ("accepted", "acknowledgement") == (answer["status"], answer["stage"])
        assert STATUS_KEYS | {"stage"} == set(answer)

    def test_graph_acceptance_shows_graph_submission(self) -> None:
        graph = SmtpAccepted(stage="graph_submission", reply_code=202, enhanced_status="")
        assert "graph_submission" == status_of([*SENT, graph])["stage"]

    @pytest.mark.parametrize(
        ("items", "stage"),
        [
            ((prepared(), claimed(), ABORTED), "integrity_validation"),
            (
                (prepared(), claimed(), DispatchAborted(
                    stage="validation", reason="local_validation", network_contacted=False
                )),
                "validation",
            ),
            (
                (prepared(), claimed(), DispatchAborted(
                    stage="not_attempted", reason="claim_ack_lost", network_contacted=False
                )),
                "not_attempted",
            ),
            (
                (*SENT[:3], smtp_rejected("not_attempted", "aborted_before_connect")),
                "not_attempted",
            ),
            ((*SENT[:3], smtp_rejected("connection", "connect_failed")), "connection"),
            ((*SENT[:3], smtp_rejected("authentication", "auth_failed", 535)), "authentication"),
            ((*SENT[:3], REJECTED_ENVELOPE), "envelope"),
            ((*SENT[:3], smtp_rejected("data", "data_refused", 554)), "data"),
            ((*SENT, ABORTED_BEFORE_TERMINATOR), "data"),
            ((*SENT, REJECTED_ACK), "acknowledgement"),
            ((*SENT, smtp_rejected("graph_submission", "http_4xx", 404)), "graph_submission"),
        ],
    )  # fmt: skip
    def test_rejected_shows_the_stage_of_its_terminal_event(
        self, items: tuple[EventData, ...], stage: str
    ) -> None:
        answer = status_of(items)
        assert ("rejected", stage) == (answer["status"], answer["stage"])
        assert "recovered" not in answer

    @pytest.mark.parametrize("stage", ["acknowledgement", "graph_submission"])
    def test_unknown_shows_its_stage(self, stage: str) -> None:
        data = SmtpOutcomeUnknown(stage=stage, cause="final_reply_timeout")  # type: ignore[arg-type]
        answer = status_of([*SENT, data])
        assert ("unknown", stage) == (answer["status"], answer["stage"])


class TestQueued:
    def test_a_claim_waiting_for_a_connection_is_sending_and_queued(self) -> None:
        answer = status_of([prepared(), claimed(), QUEUED])
        assert ("sending", True) == (answer["status"], answer["queued"])
        assert STATUS_KEYS | {"queued"} == set(answer)

    def test_once_the_attempt_marker_is_written_it_is_no_longer_queued(self) -> None:
        assert "queued" not in status_of([prepared(), claimed(), QUEUED, ATTEMPT])

    def test_a_send_that_waited_shows_no_trace_of_it_once_decided(self) -> None:
        answer = status_of([prepared(), claimed(), QUEUED, ATTEMPT, COMMIT, ACCEPTED])
        assert ("accepted", False) == (answer["status"], "queued" in answer)

    def test_a_queued_claim_closed_by_recovery_is_rejected_not_queued(self) -> None:
        answer = status_of([prepared(), claimed(), QUEUED, RECOVERED_NOT_ATTEMPTED])
        assert ("rejected", "not_attempted") == (answer["status"], answer["stage"])
        assert "queued" not in answer


class TestRecovery:
    @pytest.mark.parametrize(
        ("items", "status", "stage"),
        [
            ((prepared(), claimed(), RECOVERED_NOT_ATTEMPTED), "rejected", "not_attempted"),
            ((*SENT[:3], RECOVERED_NOT_SUBMITTED), "rejected", "interrupted"),
            ((*SENT, RECOVERED_UNKNOWN), "unknown", "acknowledgement"),
        ],
    )
    def test_a_recovery_classification_is_marked_recovered(
        self, items: tuple[EventData, ...], status: str, stage: str
    ) -> None:
        answer = status_of(items)
        assert (status, stage, True) == (answer["status"], answer["stage"], answer["recovered"])

    def test_a_late_outcome_never_changes_what_recovery_wrote(self) -> None:
        answer = status_of([*SENT, RECOVERED_UNKNOWN, LATE])
        assert ("unknown", True) == (answer["status"], answer["recovered"])


class TestSentFiling:
    @pytest.mark.parametrize(
        ("tail", "filing"),
        [
            ((), "pending"),  # still sending
            ((ACCEPTED,), "pending"),
            ((ACCEPTED, FILING_STARTED), "pending"),
            ((ACCEPTED, FILING_STARTED, FILING_SAVED), "saved"),
            ((ACCEPTED, FILING_STARTED, FILING_FAILED), "failed"),
            (
                (ACCEPTED, FILING_STARTED, SentFilingFailed(
                    outcome="not_applied", reason="no_unique_sent_folder"
                )),
                "failed",
            ),
            ((ACCEPTED, FILING_STARTED, FILING_UNKNOWN), "unknown"),
            ((REJECTED_ACK,), "skipped"),
            ((UNKNOWN,), "skipped"),
        ],
    )  # fmt: skip
    def test_sent_filing_follows_the_filing_events(
        self, tail: tuple[EventData, ...], filing: str
    ) -> None:
        assert filing == status_of([*SENT_FILING, *tail])["sent_filing"]

    def test_filing_status_never_changes_the_accepted_status(self) -> None:
        answer = status_of([*SENT_FILING, ACCEPTED, FILING_STARTED, FILING_UNKNOWN])
        assert ("accepted", "acknowledgement") == (answer["status"], answer["stage"])

    def test_no_sent_filing_key_when_the_claim_did_not_ask_for_one(self) -> None:
        assert "sent_filing" not in status_of([*SENT, ACCEPTED])


class TestEvidence:
    """An unknown send whose provider filed its own Sent copy: accepted, by evidence."""

    REWRITTEN = OutcomeEvidence(
        source="sent_folder", uid_validity=7, uid=44, sha256="cd" * 32, identical=False, copies=2
    )

    def test_an_unknown_send_with_its_sent_copy_recorded_is_accepted_with_the_evidence_named(
        self,
    ) -> None:
        answer = status_of([*SENT, UNKNOWN, EVIDENCE])
        assert ("accepted", "acknowledgement", "sent_copy", True, False) == (
            answer["status"], answer["stage"], answer["evidence"],
            answer["evidence_identical"], answer["delivery_verified"],
        )  # fmt: skip
        assert STATUS_KEYS | {"stage", "evidence", "evidence_identical"} == set(answer)

    def test_a_copy_with_other_bytes_is_still_evidence_and_says_so(self) -> None:
        answer = status_of([*SENT, RECOVERED_UNKNOWN, self.REWRITTEN])
        assert ("accepted", False, True) == (
            answer["status"], answer["evidence_identical"], answer["recovered"]
        )  # fmt: skip

    def test_a_send_quarantined_after_a_rollback_can_be_proven_accepted(self) -> None:
        for items in ((*SENT, QUARANTINED_COMMIT), (prepared(), QUARANTINED_PREPARATION)):
            answer = status_of([*items, self.REWRITTEN])
            assert ("accepted", "store_rollback", "sent_copy") == (
                answer["status"], answer["stage"], answer["evidence"]
            )  # fmt: skip

    def test_angelos_filed_nothing_so_a_requested_sent_copy_is_skipped(self) -> None:
        answer = status_of([*SENT_FILING, UNKNOWN, EVIDENCE])
        assert ("accepted", "skipped") == (answer["status"], answer["sent_filing"])

    def test_a_later_resolution_keeps_the_evidence_and_the_status(self) -> None:
        answer = status_of([*SENT, UNKNOWN, EVIDENCE, RESOLVED])
        assert ("accepted", "sent_copy", "arrived") == (
            answer["status"], answer["evidence"], answer["resolution"]
        )  # fmt: skip

    def test_an_unknown_send_without_evidence_names_none(self) -> None:
        answer = status_of([*SENT, UNKNOWN])
        assert "evidence" not in answer and "evidence_identical" not in answer


class TestUnavailable:
    def test_unavailable_has_exactly_three_keys(self) -> None:
        answer = status_of([])
        assert {"status", "delivery_verified", "warning"} == set(answer)
        assert ("unavailable", False) == (answer["status"], answer["delivery_verified"])

    @pytest.mark.parametrize("owner", [None, "", OTHER_OWNER, OWNER.upper(), OWNER[:-1]])
    def test_a_foreign_missing_or_malformed_owner_sees_unavailable(self, owner: str | None) -> None:
        assert status_of([]) == status_of([*SENT, ACCEPTED], owner=owner)

    def test_the_auditor_sees_every_owner(self) -> None:
        answer = status_of([*SENT, ACCEPTED], owner=None, auditor=True)
        assert "accepted" == answer["status"]

    def test_a_stream_that_does_not_start_with_a_sound_prepared_event_is_unavailable(
        self,
    ) -> None:
        entries = chain([prepared(), claimed()])
        foreign = chain([prepared()], pid="f" * 32)[0]
        broken = [
            entries[1:],  # no prepared event first
            [replace_e(entries[0], entries[0].e.replace('"seq":1', '"seq":1 '))],  # not canonical
            [msgspec.structs.replace(entries[0], h="0" * 64)],  # hash mismatch
            [msgspec.structs.replace(foreign, pid=PID)],  # another pid's event
        ]  # fmt: skip
        for stream in broken:
            assert "unavailable" == project(stream, OWNER, NOW).status
            assert integrity_alarm(stream) is not None
        assert integrity_alarm(entries) is None


class TestDefensive:
    def test_a_corrupt_later_entry_is_an_error_not_a_guess(self) -> None:
        entries = chain([*SENT, ACCEPTED])
        entries[4] = replace_e(entries[4], entries[4].e.replace("250", "251"))
        with pytest.raises(LedgerCorrupt):
            project(entries, OWNER, NOW)

    def test_a_stored_invalid_transition_is_an_error(self) -> None:
        with pytest.raises(InvalidTransition):
            project(chain([prepared(), claimed(), ACCEPTED]), OWNER, NOW)

    def test_a_stream_longer_than_128_entries_is_corrupt(self) -> None:
        entries = chain([prepared()])
        with pytest.raises(LedgerCorrupt):
            project(entries * 129, OWNER, NOW)

    def test_annotations_never_change_the_status(self) -> None:
        plain = status_of([*SENT, ACCEPTED])
        assert plain == status_of([*SENT, ACCEPTED, DUPLICATE, REFUSED, DUPLICATE])

    def test_the_warning_carries_the_four_compatibility_phrases(self) -> None:
        for answer in (status_of([]), status_of([prepared()]), status_of([*SENT, UNKNOWN])):
            for phrase in PHRASES:
                assert phrase in answer["warning"]

    def test_no_private_or_binding_value_is_ever_returned(self) -> None:
        text = msgspec.json.encode(status_of([*SENT_FILING, ACCEPTED, FILING_STARTED]))
        for secret in (DIGEST, OWNER, "payload_sha256", "e5e5", "smtp.example.test"):
            assert secret.encode() not in text


class TestAuditorReplay:
    def test_a_replay_as_of_an_earlier_time_equals_the_answer_given_then(self) -> None:
        entries = chain([*SENT, ACCEPTED], srv_ms=[T0 + n * 1000 for n in range(1, 6)])
        live_then = project(entries[:3], OWNER, T0 + 3500)
        assert live_then == project(
            entries_as_of(entries, T0 + 3500), None, T0 + 3500, auditor=True
        )
        assert "sending" == live_then.status


class TestTime:
    @pytest.mark.parametrize(
        ("ms", "text"),
        [
            (0, "1970-01-01T00:00:00Z"),
            (1_800_000_900_999, "2027-01-15T08:15:00Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59Z"),
        ],
    )
    def test_expires_at_is_whole_second_utc_rounded_down(self, ms: int, text: str) -> None:
        assert text == rfc3339_seconds(ms)


ALL_DATA = st.sampled_from(
    [
        *SAMPLES.values(),
        ACCEPTED,
        REJECTED_ACK,
        ABORTED_BEFORE_TERMINATOR,
        RECOVERED_NOT_SUBMITTED,
        RECOVERED_UNKNOWN,
        claimed(append_sent=True),
    ]
)


class TestProperties:
    @settings(max_examples=200, deadline=None)
    @given(st.lists(ALL_DATA, max_size=8), st.integers(min_value=T0, max_value=T0 + 2 * TTL_MS))
    def test_random_streams_project_to_a_status_or_a_typed_error(
        self, items: list[EventData], now: int
    ) -> None:
        entries = chain(items, srv_ms=[T0 + 1_000_000 + n for n in range(len(items))])
        try:
            answer = project(entries, OWNER, now)
        except LedgerCorrupt:
            return
        assert answer.status in {
            "prepared", "sending", "accepted", "rejected", "unknown", "expired", "unavailable"
        }  # fmt: skip
        assert answer.delivery_verified is False
