"""Shared pytest fixtures. Keep this file small: put helpers in tests/support/."""

import signal
from types import FrameType

from support.graph_deploy import graph
from support.services import rig, services

__all__ = ["graph", "rig", "services"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


# A run stopped with SIGTERM (a CI timeout, `timeout`, `kill`) unwinds like Ctrl-C, so fixture
# teardowns still stop the servers the tests started instead of leaving them running.
signal.signal(signal.SIGTERM, _interrupt)
