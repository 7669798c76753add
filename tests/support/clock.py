"""A monotonic clock the test moves by hand, for code that takes its clock as a parameter."""

from __future__ import annotations


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
