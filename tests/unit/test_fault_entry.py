"""The fault tests' entry point accepts only the pipeline's named steps and two modes."""

from __future__ import annotations

import signal

import pytest
from faults.fault_server import parse_point


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("after_claim", ("after_claim", signal.SIGKILL)),
        ("after_attempt_started", ("after_attempt_started", signal.SIGKILL)),
        ("after_filing_started:exit", ("after_filing_started", signal.SIGKILL)),
        ("mid_body:stop", ("mid_body", signal.SIGSTOP)),
        ("while_queued:stop", ("while_queued", signal.SIGSTOP)),
    ],
)
def test_known_steps_and_modes(text: str, expected: tuple[str, signal.Signals]) -> None:
    """A step the pipeline names, with :exit (the default) or :stop, is armed as written."""
    assert parse_point(text) == expected


@pytest.mark.parametrize("text", ["after_everything", "after_claim:pause", "AFTER_CLAIM", ""])
def test_a_typo_fails_loudly(text: str) -> None:
    """A typo in a fault test stops the server at start instead of testing nothing."""
    with pytest.raises(ValueError, match="TEST_FAULT_POINT"):
        parse_point(text)
