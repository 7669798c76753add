"""The terminal event a submission's ending maps to, and what it says publicly."""

from __future__ import annotations

import pytest

from ledger.dispatch.outcomes import rejected, stage_of, status_of
from schemas.ledger import Event, encode_event
from schemas.ledger_events import SmtpAccepted, SmtpOutcomeUnknown, SmtpRejected
from schemas.submission import NotSent
from support.ledger import PID


def sealed(data: SmtpRejected) -> bytes:
    """Encode the event strictly, as the store would before writing it."""
    event = Event(
        pid=PID, seq=4, type="smtp_rejected", eid="e" * 32, prev="0" * 64, at_ms=1,
        actor="dispatcher:" + "d" * 32, data=data,
    )  # fmt: skip
    return encode_event(event)


class TestRejected:
    def test_a_refusal_keeps_its_stage_reason_and_code(self) -> None:
        event = rejected(NotSent("envelope", "recipient_refused", 550, "5.1.1"))
        assert ("envelope", "recipient_refused", 550, "5.1.1", True) == (
            event.stage, event.reason, event.reply_code, event.enhanced_status,
            event.network_contacted,
        )  # fmt: skip
        assert sealed(event)

    def test_the_submissions_own_last_check_is_recorded_as_aborted_before_connect(self) -> None:
        event = rejected(NotSent("validation", "local_validation", network_contacted=False))
        assert ("not_attempted", "aborted_before_connect", False) == (
            event.stage,
            event.reason,
            event.network_contacted,
        )
        assert sealed(event)  # a valid smtp_rejected event, unlike a 'validation' stage


class TestPublicWords:
    @pytest.mark.parametrize(
        ("outcome", "status", "stage"),
        [
            (SmtpAccepted(stage="acknowledgement", reply_code=250, enhanced_status="2.0.0"),
             "accepted", "acknowledgement"),
            (rejected(NotSent("data", "data_refused", 554)), "rejected", "data"),
            (SmtpOutcomeUnknown(stage="acknowledgement", cause="final_reply_timeout"),
             "unknown", "acknowledgement"),
        ],
    )  # fmt: skip
    def test_each_terminal_event_has_its_status_and_stage(
        self, outcome: SmtpAccepted | SmtpRejected | SmtpOutcomeUnknown, status: str, stage: str
    ) -> None:
        assert (status, stage) == (status_of(outcome), stage_of(outcome))
