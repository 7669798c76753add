"""The submission outcome classes: a closed vocabulary and texts free of server words."""

from __future__ import annotations

import pickle
from typing import get_args, get_type_hints

import pytest

from providers.smtp import SmtpSettings, SmtpSubmitter
from schemas.ledger_events import SmtpOutcomeUnknown, SmtpRejected
from schemas.secret import Secret
from schemas.submission import (
    MAYBE_SENT_CAUSES,
    NOT_SENT_REASONS,
    Envelope,
    MaybeSent,
    NotSent,
    SmtpEndpoint,
    SubmissionError,
)


class TestNotSent:
    def test_it_carries_what_the_ledger_records(self) -> None:
        error = NotSent("envelope", "recipient_refused", 550, "5.1.1")
        assert ("envelope", "recipient_refused", 550, "5.1.1", True) == (
            error.stage,
            error.reason,
            error.reply_code,
            error.enhanced_status,
            error.network_contacted,
        )

    def test_the_text_names_reason_stage_and_code_only(self) -> None:
        error = NotSent("acknowledgement", "final_reply_negative", 554, "5.7.1")
        assert "not sent: final_reply_negative at stage acknowledgement (reply 554 5.7.1)" == str(
            error
        )

    def test_an_unknown_stage_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError):
            NotSent("greeting", "connect_failed")

    def test_an_unknown_reason_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError):
            NotSent("connection", "server said no")

    def test_every_reason_but_local_validation_is_one_the_ledger_can_record(self) -> None:
        recordable = set(get_args(get_type_hints(SmtpRejected)["reason"]))
        assert set() == (NOT_SENT_REASONS - {"local_validation"}) - recordable
        assert "local_validation" in NOT_SENT_REASONS

    def test_it_survives_pickling(self) -> None:
        error = NotSent("connection", "connect_failed", network_contacted=False)
        copy = pickle.loads(pickle.dumps(error))
        assert repr(error) == repr(copy)


class TestMaybeSent:
    def test_it_only_happens_at_a_final_stage(self) -> None:
        with pytest.raises(ValueError):
            MaybeSent("data", "connection_lost")  # type: ignore[arg-type]
        assert "graph_submission" == MaybeSent("graph_submission", "http_5xx").stage

    def test_every_cause_is_one_the_ledger_can_record(self) -> None:
        recordable = set(get_args(get_type_hints(SmtpOutcomeUnknown)["cause"]))
        assert set() == MAYBE_SENT_CAUSES - recordable


    def test_the_text_says_never_to_resend(self) -> None:
        assert "do not resend" in str(MaybeSent("acknowledgement", "final_reply_timeout"))

    def test_both_outcomes_share_one_base(self) -> None:
        assert issubclass(NotSent, SubmissionError)
        assert issubclass(MaybeSent, SubmissionError)
        assert not issubclass(MaybeSent, NotSent)


class TestSubmitter:
    def settings(self, tls_mode: str = "tls") -> SmtpSettings:
        return SmtpSettings(
            host="smtp.example.test",
            port=465,
            tls_mode=tls_mode,
            username="alice@example.test",
            password=Secret("hunter2-secret"),
            ca_file=None,
            allow_private_hosts=False,
            timeout_s=30.0,
        )

    def test_the_endpoint_comes_from_configuration(self) -> None:
        endpoint = SmtpSubmitter(self.settings("starttls")).endpoint
        assert SmtpEndpoint("smtp.example.test", 465, "starttls", "plain") == endpoint

    def test_a_plaintext_mode_is_refused(self) -> None:
        with pytest.raises(ValueError):
            SmtpSubmitter(self.settings("none"))

    def test_the_settings_never_show_the_password(self) -> None:
        assert "hunter2-secret" not in repr(self.settings())

    def test_the_termination_timeout_defaults_to_ten_minutes(self) -> None:
        assert 600.0 == self.settings().termination_timeout_s

    async def test_begin_refuses_a_smuggled_address_before_any_network(self) -> None:
        envelope = Envelope("alice@example.test", ("bob@example.test>\r\nDATA",))
        with pytest.raises(NotSent) as caught:
            await SmtpSubmitter(self.settings()).begin(envelope, b"From: x\r\n\r\nhi\r\n")
        assert ("validation", "local_validation", False) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.network_contacted,
        )
