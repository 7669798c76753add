"""What a recovery pass (or a rollback quarantine) concluded about each candidate, as a report."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct, field

from ledger.store.answers import Halt

Kind = Literal["dispatch", "filing", "expiry", "preparation", "evidence"]
Action = Literal[
    "classified",  # recovery closed the dispatch (or the filing) now
    "expired",  # the sweeper recorded an unclaimed preparation's expiry now
    "quarantined",  # after a rollback: the open send was closed as unknown now
    "evidenced",  # the provider's own Sent copy of an unknown send was found and recorded now
    "no_evidence",  # searched Sent and found no copy: proves nothing, the send stays unknown
    "search_failed",  # the mailbox did not answer the search; the send stays unknown
    "would_classify",  # dry run: what recovery would write
    "would_expire",  # dry run: what the sweeper would write
    "would_quarantine",  # dry run: what the quarantine would write
    "would_search",  # dry run: an unknown send recovery would search Sent for
    "lease_alive",  # the claim's dispatcher is alive: left alone
    "too_early",  # the grace (or the preparation deadline) has not passed yet
    "already_closed",  # another writer closed it; the stale member was removed
    "stream_gone",  # the stream no longer exists; the stale member was removed
    "fenced",  # someone appended first; the next pass re-reads it
    "corrupt",  # the stream failed its checks: nothing written, operator alarm
]


class Decision(Struct, frozen=True, kw_only=True):
    """What recovery concluded about one candidate, and what it wrote (if anything)."""

    pid: str
    kind: Kind
    action: Action
    last_lifecycle_type: str = ""
    verdict: str = ""  # e.g. "rejected/not_attempted", "unknown/acknowledgement"
    # too_early: the server time from which recovery may decide; no_evidence and
    # search_failed: when the next search is (0 when none is left)
    decidable_ms: int = 0

    @property
    def wrote(self) -> bool:
        """Tell whether this decision appended an event."""
        return self.action in ("classified", "expired", "quarantined", "evidenced")


class RecoveryReport(Struct, kw_only=True):
    """One recovery pass: every candidate examined and the decision taken for it."""

    dry_run: bool
    server_ms: int = 0
    grace_ms: int = 0
    halt: Halt | None = None  # a recorded rollback: this pass quarantined instead of recovering
    decisions: list[Decision] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Return how many decisions took each action."""
        found: dict[str, int] = {}
        for decision in self.decisions:
            found[decision.action] = found.get(decision.action, 0) + 1
        return found
