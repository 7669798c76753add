"""The typed error hierarchy: one class per outcome a caller can tell apart."""

from __future__ import annotations

import pytest

from schemas import errors
from schemas.error_object import GUIDANCE

CODES = {
    "invalid_arguments", "stale_reference", "conflict", "not_found", "unsupported_operation",
    "safety_limit", "service_unavailable", "outcome_unknown", "deadline_exceeded",
    "deployment_disabled", "insufficient_scope", "operation_failed", "recipient_not_allowed",
    "approval_unavailable", "approval_declined", "rate_limited",
}  # fmt: skip


def all_error_classes() -> list[type[errors.MailError]]:
    found: list[type[errors.MailError]] = []
    pending: list[type[errors.MailError]] = [errors.MailError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


class TestErrors:
    def test_the_classes_cover_exactly_the_16_codes(self) -> None:
        assert {cls.code for cls in all_error_classes()} == CODES

    def test_the_draft_conflict_is_a_conflict(self) -> None:
        error = errors.DraftConflict()
        assert isinstance(error, errors.Conflict)
        assert error.code == "conflict"
        assert error.message != errors.Conflict().message

    def test_an_expired_deadline_is_also_a_timeout_error(self) -> None:
        error = errors.DeadlineExceeded()
        assert isinstance(error, TimeoutError)
        assert str(error) == errors.DeadlineExceeded.default_message

    def test_a_partial_outcome_travels_with_the_error(self) -> None:
        outcome = {"status": "unknown"}
        assert errors.OutcomeUnknown(outcome=outcome).outcome is outcome
        assert errors.ServiceUnavailable().outcome is None

    def test_a_scope_error_names_the_missing_scopes_in_order(self) -> None:
        error = errors.InsufficientScope("mail.write", "mail.send")
        assert ("insufficient_scope", ("mail.write", "mail.send")) == (error.code, error.required)

    def test_a_scope_error_must_name_a_scope(self) -> None:
        with pytest.raises(ValueError):
            errors.InsufficientScope()

    def test_every_code_has_guidance(self) -> None:
        assert set(GUIDANCE) == CODES

    def test_a_refused_recipient_is_invalid_input(self) -> None:
        error = errors.RecipientNotAllowed()
        assert isinstance(error, errors.InvalidArguments)
        assert ("recipient_not_allowed", "correct_input") == (
            error.code, GUIDANCE[error.code][0]
        )  # fmt: skip

    def test_the_approval_and_rate_errors_are_their_own_codes(self) -> None:
        kinds = (errors.ApprovalUnavailable, errors.ApprovalDeclined, errors.RateLimited)
        assert all(cls.__bases__ == (errors.MailError,) for cls in kinds)
        assert ["approve_out_of_band", "ask_owner", "wait_until"] == [
            GUIDANCE[cls.code][0] for cls in kinds
        ]

    def test_a_rate_limit_carries_when_to_try_again(self) -> None:
        outcome = {"status": "not_sent", "retry_at": "2027-01-15T08:00:00+00:00"}
        assert errors.RateLimited(outcome=outcome).outcome is outcome
