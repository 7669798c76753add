"""`angelos` with a fault at one named dispatch step: the fault tests' entry point.

`TEST_FAULT_POINT=<step>[:exit|:stop]` makes every dispatcher the server arms kill itself
(SIGKILL, `exit`, the default) or stop itself (SIGSTOP, `stop`) when a send reaches that step.
Production code only offers the no-op checkpoint; the fault lives here.

`TEST_PINNED_ROUTES=<file>` (optional; the JSON plan tests/support/pinned_launch.py reads)
reroutes the pinned provider hosts (graph.microsoft.com, login.microsoftonline.com) to this
test run's loopback doubles through the test seam, which only a Python call can install: the
product has no setting for it. Either variable works without the other (a server or a ledger
command of a Graph deployment needs only the routes).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import get_args

import structlog

from ledger.dispatch.pipeline import CheckpointName, Dispatcher
from service import sending
from service.cli import main

log = structlog.get_logger("angelos.fault")
MODES = {"exit": signal.SIGKILL, "stop": signal.SIGSTOP}
TESTS = Path(__file__).resolve().parents[1]  # tests/: where the `support` package lives


def parse_point(text: str) -> tuple[CheckpointName, signal.Signals]:
    """Split `<step>[:exit|:stop]` into a known step and its signal, or raise ValueError."""
    point, _, mode = text.partition(":")
    steps: tuple[CheckpointName, ...] = get_args(CheckpointName)
    for step in steps:
        if step == point and (mode or "exit") in MODES:
            return step, MODES[mode or "exit"]
    raise ValueError(f"TEST_FAULT_POINT: unknown step or mode {text!r}")


def arm(point: CheckpointName, signum: signal.Signals) -> None:
    """Install a checkpoint that signals this process at `point` in every armed dispatcher."""

    async def checkpoint(reached: CheckpointName) -> None:
        if reached != point:
            return
        log.warning("fault_point_reached", point=reached)
        os.kill(os.getpid(), signum)
        await asyncio.sleep(0)

    def install(dispatcher: Dispatcher) -> None:
        dispatcher.checkpoint = checkpoint

    sending.ON_DISPATCHER.append(install)


def run(argv: list[str]) -> int:
    """Run the CLI with `argv`, through pinned_launch when TEST_PINNED_ROUTES names a plan."""
    routes = os.environ.get("TEST_PINNED_ROUTES")
    if not routes:
        return main(argv)
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from support.pinned_launch import main as pinned_launch

    return pinned_launch([routes, "--", *argv])


if __name__ == "__main__":
    if os.environ.get("TEST_FAULT_POINT"):
        arm(*parse_point(os.environ["TEST_FAULT_POINT"]))
    sys.argv[0] = "angelos"
    raise SystemExit(run(sys.argv[1:]))
