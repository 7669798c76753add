"""The malformed-request log: at most one line per interval, counting the requests not logged."""

from __future__ import annotations

from structlog.testing import capture_logs

from service.transports.http_listener import MalformedLog


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_interval_and_the_next_line_counts_those_not_logged() -> None:
    clock = Clock()
    malformed = MalformedLog(every_s=60, clock=clock)
    logged = []
    with capture_logs() as lines:
        for at, reason in [(0, "A"), (1, "B"), (59.9, "C"), (60, "D"), (61, "E"), (200, "F")]:
            clock.now = 1000.0 + at
            logged.append(malformed.note(reason))
    assert [True, False, False, True, False, True] == logged
    assert [("info", "A", 0), ("info", "D", 2), ("info", "F", 1)] == [
        (line["log_level"], line["reason"], line["not_logged_since"]) for line in lines
    ]
