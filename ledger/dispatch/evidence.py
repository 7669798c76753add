"""Evidence that an unknown send was accepted: the provider's own copy in its Sent folder.

A send whose SMTP outcome was lost ends `unknown` and is never retried. A provider that files
every message it accepts (Gmail; Exchange) holds a copy in its Sent folder only if it took the
message, so a copy carrying the preparation's exact Message-ID is positive evidence:
`outcome_evidence` moves the send to EVIDENCED, public status `accepted`. Absence proves
nothing (the provider may file late, elsewhere or not at all) and is never written. Nothing
here claims, connects, submits or files anything; the mailbox is only read.

Recovery searches from the recorded grace on, a few times over a day (SEARCH_SCHEDULE_MS), and
only in a deployment whose provider files Sent itself; `angelos ledger evidence` searches on a
person's request, for any provider.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

import structlog
from msgspec import UNSET

from ledger.chain import verified_events
from ledger.dispatch.decisions import Decision, RecoveryReport
from ledger.ids import new_id
from ledger.lifecycle import AWAITS_EVIDENCE, Lifecycle, fold, grace_for
from ledger.store.bulk import BulkReader, pages
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.errors import MailError
from schemas.ledger import LedgerEntry
from schemas.ledger_events import OutcomeEvidence, SmtpCommitPoint

log = structlog.get_logger("angelos.ledger.evidence")
_MINUTE: Final = 60_000
_HOUR: Final = 60 * _MINUTE
# When recovery searches, counted from the first moment it may (the grace after the claim):
# then, and backing off, for at most a day. After the last one the send stays unknown for good
# unless a person finds more (`angelos ledger evidence`, `angelos ledger resolve`).
SEARCH_SCHEDULE_MS: Final = (0, 15 * _MINUTE, _HOUR, 4 * _HOUR, 12 * _HOUR, 24 * _HOUR)
SEARCHES_PER_PASS: Final = 16  # mailbox searches one recovery pass makes at most; more wait
VERDICT: Final = "accepted/sent_copy"


class SentCopy(Protocol):
    """A message in a Sent folder carrying exactly the searched Message-ID (read-only view)."""

    @property
    def folder(self) -> str:
        """The folder's name, for the person who asked; never recorded in the ledger."""
        ...

    @property
    def uid_validity(self) -> int:
        """The folder's UIDVALIDITY."""
        ...

    @property
    def uid(self) -> int:
        """The copy's UID."""
        ...

    @property
    def sha256(self) -> str | None:
        """The SHA-256 of the copy's exact bytes (None: too large to read whole)."""
        ...

    @property
    def graph_id(self) -> str:
        """A Microsoft Graph copy's immutable ID ("" for an IMAP copy, located by UID)."""
        ...


class SentCopyFinder(Protocol):
    """Searches the provider's Sent folder(s) for a Message-ID; it only ever reads."""

    async def find_sent_copies(self, message_id: str) -> Sequence[SentCopy]:
        """Return every copy whose own Message-ID is exactly `message_id` (raises MailError)."""
        ...


def first_search_ms(lifecycle: Lifecycle, grace_ms: int) -> int | None:
    """When recovery may first search for an unknown send's copy (None: it awaits none).

    The grace runs from the claim (the longer of the recorded and the configured one), or, for
    a preparation quarantined before any claim, from the quarantine.
    """
    if lifecycle.state not in AWAITS_EVIDENCE:
        return None
    since = lifecycle.claimed_srv_ms
    if since is None:
        since = lifecycle.terminal_srv_ms
    return None if since is None else since + grace_for(lifecycle, grace_ms)


def next_search_ms(first_ms: int, now_ms: int) -> int | None:
    """The next scheduled search after `now_ms`, or None once the last one has passed."""
    return next((first_ms + o for o in SEARCH_SCHEDULE_MS if first_ms + o > now_ms), None)


def evidence_from(
    copies: Sequence[SentCopy], commit: SmtpCommitPoint | None
) -> OutcomeEvidence | None:
    """The event naming the best copy (one whose bytes are those submitted, if any), or None."""
    if not copies:
        return None
    submitted = None if commit is None else commit.raw_sha256

    def identical(copy: SentCopy) -> bool:
        return submitted is not None and copy.sha256 == submitted

    best = next((copy for copy in copies if identical(copy)), copies[0])
    graph = bool(best.graph_id)
    return OutcomeEvidence(
        source="sent_folder",
        uid_validity=UNSET if graph else best.uid_validity,
        uid=UNSET if graph else best.uid,
        graph_id=best.graph_id if graph else UNSET,
        sha256=UNSET if best.sha256 is None else best.sha256,
        identical=identical(best),
        copies=len(copies),
    )


SearchResult = Literal["recorded", "absent", "not_unknown", "fenced", "stream_gone", "corrupt"]


@dataclass(frozen=True)
class Search:
    """One search for evidence of one send, and what came of it."""

    pid: str
    result: SearchResult
    state: str = ""  # the lifecycle state found before searching
    copies: Sequence[SentCopy] = ()
    evidence: OutcomeEvidence | None = None  # what was recorded (result "recorded")
    seq: int = 0  # where it was recorded


def lifecycle_of(pid: str, entries: Sequence[LedgerEntry]) -> Lifecycle:
    """Fold a stream after verifying its chain (raises MailError when it does not verify)."""
    return fold(verified_events(pid, entries), [entry.srv_ms for entry in entries])


async def search_and_record(
    store: LedgerStore,
    pid: str,
    entries: Sequence[LedgerEntry],
    finder: SentCopyFinder,
    actor: str,
) -> Search:
    """Search for the send's copy and, when one is found, append `outcome_evidence`.

    Only a send in an unknown state is searched for; the mailbox is read, never written, and
    nothing is ever resent. A MailError of the search itself propagates.
    """
    if not entries:
        return Search(pid, "stream_gone")
    try:
        lifecycle = lifecycle_of(pid, entries)
    except MailError:
        log.critical("send_ledger_integrity_alarm", pid=pid, problem="evidence_read")
        return Search(pid, "corrupt")
    head = head_of(entries)
    if lifecycle.state not in AWAITS_EVIDENCE or lifecycle.prepared is None or head is None:
        return Search(pid, "not_unknown", lifecycle.state)
    copies = tuple(await finder.find_sent_copies(lifecycle.prepared.message_id))
    data = evidence_from(copies, lifecycle.commit)
    if data is None:
        return Search(pid, "absent", lifecycle.state)
    outcome = await store.append(pid, head, data, actor=actor, eid=new_id())
    if outcome.result not in ("appended", "duplicate"):
        # Someone recorded the evidence first (or the stream moved on): nothing is lost.
        return Search(pid, "fenced", lifecycle.state, copies)
    log.warning("outcome_evidence_recorded", pid=pid, identical=data.identical, copies=data.copies)
    return Search(pid, "recorded", lifecycle.state, copies, data, outcome.seq)


class EvidencePass:
    """Recovery's searches for evidence of unknown sends whose grace has passed."""

    def __init__(
        self,
        store: LedgerStore,
        reader: BulkReader,
        finder: SentCopyFinder | None,
        *,
        actor: str,
        grace_ms: int,
        page: int,
    ) -> None:
        self.store = store
        self.reader = reader
        self.finder = finder
        self.actor = actor
        self.grace_ms = grace_ms
        self.page = page

    async def run(
        self, report: RecoveryReport, progress: Callable[[int], None] | None = None
    ) -> None:
        """Search once for every due send, at most SEARCHES_PER_PASS of them; report each.

        Without a finder (the provider does not file Sent) nothing is searched and nothing is
        reported: the work list is only kept short.
        """
        now = report.server_ms
        budget = SEARCHES_PER_PASS
        due = [pid for pid, _ in await self.reader.due_evidence(now)]
        for chunk in pages(due, self.page):
            _, streams = await self.reader.entries(chunk)
            for pid, entries in zip(chunk, streams, strict=True):
                decision, searched = await self._one(pid, entries, now, report.dry_run, budget)
                budget -= searched
                if decision is not None and self.finder is not None:
                    report.decisions.append(decision)
            if progress is not None:
                progress(len(report.decisions))

    async def _one(
        self, pid: str, entries: list[LedgerEntry], now: int, dry_run: bool, budget: int
    ) -> tuple[Decision | None, int]:
        if not entries:
            await self._forget(pid, dry_run)
            return Decision(pid=pid, kind="evidence", action="stream_gone"), 0
        try:
            lifecycle = lifecycle_of(pid, entries)
        except MailError:
            log.critical("send_ledger_integrity_alarm", pid=pid, problem="evidence_read")
            return Decision(pid=pid, kind="evidence", action="corrupt"), 0
        last = lifecycle.last_lifecycle_type
        first = first_search_ms(lifecycle, self.grace_ms)
        if first is None:
            await self._forget(pid, dry_run)
            return Decision(
                pid=pid, kind="evidence", action="already_closed", last_lifecycle_type=last
            ), 0
        if now < first:
            return Decision(
                pid=pid, kind="evidence", action="too_early", last_lifecycle_type=last,
                decidable_ms=first,
            ), 0  # fmt: skip
        if dry_run:
            return Decision(
                pid=pid, kind="evidence", action="would_search", last_lifecycle_type=last
            ), 0
        if self.finder is None:
            await self._schedule(pid, first, now)
            return None, 0
        if budget <= 0:
            return None, 0  # still due: the next pass searches it
        action, found = await self._search(pid, entries)
        if action == "evidenced":
            return Decision(
                pid=pid, kind="evidence", action="evidenced", last_lifecycle_type=last,
                verdict=VERDICT,
            ), 1  # fmt: skip
        upcoming = 0 if found else await self._schedule(pid, first, now)
        return Decision(
            pid=pid, kind="evidence", action=action, last_lifecycle_type=last,
            decidable_ms=upcoming,
        ), 1  # fmt: skip

    async def _search(
        self, pid: str, entries: list[LedgerEntry]
    ) -> tuple[Literal["evidenced", "no_evidence", "search_failed", "fenced"], bool]:
        """Search once; say what came of it and whether the stream moved on meanwhile."""
        assert self.finder is not None
        try:
            search = await search_and_record(self.store, pid, entries, self.finder, self.actor)
        except MailError:
            # The mailbox did not answer: this counts as one of the send's searches.
            log.warning("evidence_search_failed", pid=pid)
            return "search_failed", False
        if search.result == "recorded":
            return "evidenced", True
        if search.result == "fenced":
            return "fenced", True
        return "no_evidence", False

    async def _schedule(self, pid: str, first: int, now: int) -> int:
        """Set the send's next search, or drop it once none is left; return when (0: none)."""
        upcoming = next_search_ms(first, now)
        if upcoming is None:
            log.info("evidence_search_ended", pid=pid)
            await self.store.forget_evidence(pid)
            return 0
        await self.store.schedule_evidence(pid, upcoming)
        return upcoming

    async def _forget(self, pid: str, dry_run: bool) -> None:
        if not dry_run:
            await self.store.forget_evidence(pid)
