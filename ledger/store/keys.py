"""Redis key names of the send ledger; all share one hash tag."""

from __future__ import annotations

import re
from typing import Final

from msgspec import Struct

_NAMESPACE = re.compile(r"[a-z0-9-]{1,32}", re.ASCII)
_PID = re.compile(r"[0-9a-f]{32}", re.ASCII)
SCHEMA_VERSION: Final = "2"


class LedgerKeys(Struct, frozen=True):
    """Every key of one namespace `N`: `N:v2:{N-send}:<suffix>`."""

    namespace: str

    def __post_init__(self) -> None:
        if _NAMESPACE.fullmatch(self.namespace) is None:
            raise ValueError("the ledger namespace must be 1-32 characters of a-z, 0-9 and -")

    @property
    def prefix(self) -> str:
        """Return the common prefix, ending in a colon."""
        return f"{self.namespace}:v2:{{{self.namespace}-send}}:"

    def stream(self, pid: str) -> str:
        """Return the per-send ledger stream key."""
        return f"{self.prefix}s:{_checked(pid)}"

    def payload(self, pid: str) -> str:
        """Return the private payload key."""
        return f"{self.prefix}p:{_checked(pid)}"

    @property
    def index(self) -> str:
        """Return the global locator stream key."""
        return f"{self.prefix}index"

    @property
    def open(self) -> str:
        """Return the sorted set of open dispatches (`d:<pid>`) and filings (`f:<pid>`)."""
        return f"{self.prefix}open"

    @property
    def unclaimed(self) -> str:
        """Return the sorted set of unclaimed preparations scored by `expires_ms`."""
        return f"{self.prefix}unclaimed"

    @property
    def evidence(self) -> str:
        """Return the sorted set of unknown sends awaiting a search for evidence, by due time."""
        return f"{self.prefix}evidence"

    @property
    def rate(self) -> str:
        """Return the sorted set of recent claims, for the send rate limit's sliding window."""
        return f"{self.prefix}rate"

    def lease(self, dispatcher_id: str) -> str:
        """Return the liveness lease key of one dispatcher."""
        return f"{self.prefix}lease:{_checked(dispatcher_id)}"

    @property
    def archive_lease(self) -> str:
        """Return the lease key of the one archiver."""
        return f"{self.prefix}archive-lease"

    @property
    def meta(self) -> str:
        """Return the meta hash key."""
        return f"{self.prefix}meta"


def _checked(ident: str) -> str:
    # pids and dispatcher ids are both 32 lowercase hex; nothing else may become part of a key.
    if _PID.fullmatch(ident) is None:
        raise ValueError("ledger identifiers must be 32 lowercase hex characters")
    return ident
