"""`angelos` that SIGKILLs itself once an `approved` event is durable, before any claim.

The approval gate (service/approval/gate.py) records a person's accept with the ledger store's
`append` and only then lets the dispatcher claim; the dispatcher's checkpoints
(tests/faults/fault_server.py) all come after the claim. This entry point wraps
`LedgerStore.append` in this process alone: when the store has acknowledged an `Approved`
event (appended, or a duplicate of it), the process kills itself with SIGKILL before the
gate returns, so no claim can follow. The product is unchanged; the fault lives here, installed
by a Python call as fault_server.py installs its checkpoint.

`TEST_APPROVAL_FAULT=after_approved` arms it; without it this is plain `angelos`.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import structlog

from ledger.store.answers import AppendOutcome
from ledger.store.ledger_store import LedgerStore
from schemas.ledger_events import Approved, EventData
from service.cli import main

log = structlog.get_logger("angelos.fault")
POINT = "after_approved"


def arm() -> None:
    """Kill this process as soon as the store acknowledges an `approved` event."""
    original = LedgerStore.append

    async def append(
        self: LedgerStore, pid: str, head: Any, data: EventData, **kwargs: Any
    ) -> AppendOutcome:
        outcome = await original(self, pid, head, data, **kwargs)
        if isinstance(data, Approved) and outcome.result in ("appended", "duplicate"):
            log.warning("fault_point_reached", point=POINT, pid=pid)
            os.kill(os.getpid(), signal.SIGKILL)
        return outcome

    LedgerStore.append = append  # type: ignore[method-assign]


if __name__ == "__main__":
    fault = os.environ.get("TEST_APPROVAL_FAULT")
    if fault is not None:
        if fault != POINT:
            raise SystemExit(f"TEST_APPROVAL_FAULT: unknown point {fault!r} (only {POINT})")
        arm()
    sys.argv[0] = "angelos"
    raise SystemExit(main(sys.argv[1:]))
