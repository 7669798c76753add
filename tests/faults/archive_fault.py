"""`angelos` whose archiver kills itself at one named step: the archive fault tests' entry point.

`TEST_ARCHIVE_POINT=<step>[:<k>]` sends SIGKILL to this process the k-th time (default the
first) the archiver reaches that step. Production code only calls the no-op hook list.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import get_args

from ledger.archive.archiver import ON_ARCHIVER, ArchivePoint
from service.cli import main


def parse_point(text: str) -> tuple[ArchivePoint, int]:
    """Split `<step>[:<k>]` into a known step and which arrival kills, or raise ValueError."""
    point, _, nth = text.partition(":")
    for step in get_args(ArchivePoint):
        if step == point and (not nth or nth.isdigit()):
            return step, int(nth or 1)
    raise ValueError(f"TEST_ARCHIVE_POINT: unknown step {text!r}")


def arm(point: ArchivePoint, nth: int) -> None:
    """Kill this process at the nth arrival at `point`."""
    seen = [0]

    def hook(reached: ArchivePoint) -> None:
        if reached == point:
            seen[0] += 1
            if seen[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    ON_ARCHIVER.append(hook)


if __name__ == "__main__":
    arm(*parse_point(os.environ["TEST_ARCHIVE_POINT"]))
    sys.argv[0] = "angelos"
    raise SystemExit(main())
