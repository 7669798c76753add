"""The whole-ledger summary a `verify` or `replay` run folds each stream's verdict into."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from ledger.audit.checks import Finding, StreamAudit
from schemas.ledger import LedgerEntry


class Step(Struct, frozen=True):
    """One stored event of a send, as a timeline shows it: which, what, when."""

    seq: int
    type: str
    srv_ms: int


class SendSteps(Struct, frozen=True, kw_only=True):
    """One send's verdict with its events, for a report that draws every timeline."""

    pid: str
    status: str
    stage: str
    state: str
    investigate: str
    resolution: str
    steps: list[Step]
    findings: list[Finding]
    evidence: str = ""  # accepted by its Sent copy: "identical" or "other_bytes"


class LedgerAudit(Struct, kw_only=True):
    """A full verification: counts, every finding, and the sends needing investigation.

    With `keep_steps` it also keeps every send's events (for the HTML report).
    """

    streams: int = 0
    events: int = 0
    index_entries: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    investigate: list[StreamAudit] = field(default_factory=list)
    resolved: list[StreamAudit] = field(default_factory=list)
    evidenced: list[StreamAudit] = field(default_factory=list)  # accepted by their Sent copy
    grace_recorded: int = 0  # streams judged by the grace recorded at their claim
    elapsed_s: float = 0.0
    keep_steps: bool = False
    sends: list[SendSteps] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Tell whether verification found nothing wrong."""
        return not self.findings

    def add(self, audit: StreamAudit, entries: Sequence[LedgerEntry] = ()) -> None:
        """Fold one stream's verdict (and, when kept, its events) into the summary."""
        if self.keep_steps:
            self.sends.append(
                SendSteps(
                    pid=audit.pid, status=audit.status, stage=audit.stage, state=audit.state,
                    investigate=audit.investigate, resolution=audit.resolution,
                    steps=[Step(entry.seq, entry.t, entry.srv_ms) for entry in entries],
                    findings=audit.findings, evidence=audit.evidence,
                )
            )  # fmt: skip
        self.streams += 1
        self.events += audit.events
        self.statuses[audit.status] = self.statuses.get(audit.status, 0) + 1
        self.findings += audit.findings
        if audit.investigate:
            self.investigate.append(audit)
        if audit.resolution:
            self.resolved.append(audit)
        if audit.evidence:
            self.evidenced.append(audit)
        self.grace_recorded += audit.grace_recorded
