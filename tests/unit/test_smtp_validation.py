"""The submission checks that run before any connection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.smtp import validate_submission
from schemas.submission import Envelope, NotSent

SENDER = "alice@example.test"


def message(*headers: str, body: str = "hello\r\n") -> bytes:
    return ("\r\n".join(headers) + "\r\n\r\n" + body).encode()


GOOD = message(f"From: Alice <{SENDER}>", "To: bob@example.test", "Subject: hi")
ENVELOPE = Envelope(mail_from=SENDER, recipients=("bob@example.test",))


def refused(envelope: Envelope, raw: bytes, sender: str = SENDER) -> NotSent:
    with pytest.raises(NotSent) as caught:
        validate_submission(envelope, raw, sender)
    return caught.value


class TestAccepted:
    def test_a_composed_message_passes(self) -> None:
        validate_submission(ENVELOPE, GOOD, SENDER)

    def test_hundred_recipients_pass(self) -> None:
        rcpts = tuple(f"r{i}@example.test" for i in range(100))
        validate_submission(Envelope(SENDER, rcpts), GOOD, SENDER)

    def test_the_from_domain_compares_case_insensitively(self) -> None:
        raw = message("From: alice@EXAMPLE.test", "To: bob@example.test")
        validate_submission(ENVELOPE, raw, SENDER)

    def test_an_encoded_display_name_is_fine(self) -> None:
        raw = message(f"From: =?utf-8?q?J=C3=B6rg?= <{SENDER}>", "To: bob@example.test")
        validate_submission(ENVELOPE, raw, SENDER)


class TestRefused:
    def test_the_refusal_says_validation_and_no_network(self) -> None:
        error = refused(Envelope("mallory@example.test", ENVELOPE.recipients), GOOD)
        assert ("validation", "local_validation", False) == (
            error.stage,
            error.reason,
            error.network_contacted,
        )

    def test_an_envelope_sender_other_than_the_configured_one(self) -> None:
        refused(Envelope("bob@example.test", ENVELOPE.recipients), GOOD)

    def test_no_recipients(self) -> None:
        refused(Envelope(SENDER, ()), GOOD)

    def test_a_hundred_and_one_recipients(self) -> None:
        rcpts = tuple(f"r{i}@example.test" for i in range(101))
        refused(Envelope(SENDER, rcpts), GOOD)

    def test_a_recipient_with_a_display_name(self) -> None:
        refused(Envelope(SENDER, ("Bob <bob@example.test>",)), GOOD)

    def test_a_recipient_carrying_a_smuggled_command(self) -> None:
        refused(Envelope(SENDER, ("bob@example.test>\r\nRCPT TO:<eve@example.test",)), GOOD)

    def test_an_empty_message(self) -> None:
        refused(ENVELOPE, b"")

    def test_a_message_over_five_mebibytes(self) -> None:
        refused(ENVELOPE, GOOD + b"x" * (5 * 1024 * 1024))

    def test_exactly_five_mebibytes_is_allowed(self) -> None:
        raw = GOOD + b"x" * (5 * 1024 * 1024 - len(GOOD))
        validate_submission(ENVELOPE, raw, SENDER)

    def test_a_bcc_header(self) -> None:
        refused(ENVELOPE, message(f"From: {SENDER}", "To: bob@example.test", "Bcc: eve@x.test"))

    def test_a_bcc_header_in_any_case(self) -> None:
        refused(ENVELOPE, message(f"From: {SENDER}", "BCC: eve@x.test"))

    def test_an_empty_bcc_header(self) -> None:
        refused(ENVELOPE, message(f"From: {SENDER}", "Bcc:"))

    def test_a_resent_bcc_header(self) -> None:
        refused(ENVELOPE, message(f"From: {SENDER}", "Resent-Bcc: eve@x.test"))

    def test_a_header_from_other_than_the_sender(self) -> None:
        refused(ENVELOPE, message("From: mallory@example.test", "To: bob@example.test"))

    def test_a_local_part_differing_in_case(self) -> None:
        refused(ENVELOPE, message("From: Alice@example.test", "To: bob@example.test"))

    def test_two_from_headers(self) -> None:
        refused(ENVELOPE, message(f"From: {SENDER}", f"From: {SENDER}"))

    def test_two_addresses_in_from(self) -> None:
        refused(ENVELOPE, message(f"From: {SENDER}, bob@example.test"))

    def test_no_from_header(self) -> None:
        refused(ENVELOPE, message("To: bob@example.test", "Subject: hi"))

    def test_a_header_section_that_does_not_parse(self) -> None:
        refused(ENVELOPE, b"this is not a header\r\n\r\nbody\r\n")

    def test_a_message_starting_with_a_continuation_line(self) -> None:
        refused(ENVELOPE, b" folded\r\n" + GOOD)


class TestNeverRaisesAnythingElse:
    @given(st.binary(max_size=600))
    def test_arbitrary_bytes_either_pass_or_are_refused_as_not_sent(self, raw: bytes) -> None:
        try:
            validate_submission(ENVELOPE, raw, SENDER)
        except NotSent as error:
            assert "local_validation" == error.reason
