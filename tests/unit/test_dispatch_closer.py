"""What a pending close writes, decided from the stream as it is when the store answers."""

from __future__ import annotations

import msgspec

from ledger.dispatch.closer import CloseIntent, decide
from ledger.dispatch.outcomes import NOT_ATTEMPTED, TERMINATOR_WITHHELD
from schemas.ledger_events import LateOutcomeObserved
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    EIDS,
    FILING_FAILED,
    FILING_STARTED,
    QUARANTINED_COMMIT,
    RECOVERED_UNKNOWN,
    chain,
    claimed,
    prepared,
)

LATE = LateOutcomeObserved(outcome="accepted", stage="acknowledgement", reply_code=250)
OWED_EID = "e0" * 16


def intent(
    *events: object, late: LateOutcomeObserved | None = None, claim: str = ""
) -> CloseIntent:
    return CloseIntent(
        pid="0123456789abcdef0123456789abcdef", eid=OWED_EID, actor="dispatcher:" + "c3" * 16,
        events=events, late=late, claim_eid=claim,  # type: ignore[arg-type]
    )  # fmt: skip


class TestWhatAPendingCloseWrites:
    def test_a_verdict_closes_a_committed_send(self) -> None:
        stream = chain([prepared(), claimed(), ATTEMPT, COMMIT])
        assert ACCEPTED == decide(intent(ACCEPTED, late=LATE), stream)

    def test_a_verdict_after_recovery_becomes_the_late_annotation(self) -> None:
        stream = chain([prepared(), claimed(), ATTEMPT, COMMIT, RECOVERED_UNKNOWN])
        assert LATE == decide(intent(ACCEPTED, late=LATE), stream)

    def test_a_verdict_after_a_rollback_quarantine_becomes_the_late_annotation(self) -> None:
        stream = chain([prepared(), claimed(), ATTEMPT, COMMIT, QUARANTINED_COMMIT])
        assert LATE == decide(intent(ACCEPTED, late=LATE), stream)

    def test_a_stream_behind_the_verdict_waits_for_the_quarantine(self) -> None:
        stream = chain([prepared(), claimed(), ATTEMPT])  # the commit point was forgotten
        assert "wait" == decide(intent(ACCEPTED, late=LATE), stream)

    def test_not_attempted_fits_whether_or_not_the_marker_landed(self) -> None:
        aborted, refused = NOT_ATTEMPTED
        assert aborted == decide(intent(*NOT_ATTEMPTED), chain([prepared(), claimed()]))
        marked = chain([prepared(), claimed(), ATTEMPT])
        assert refused == decide(intent(*NOT_ATTEMPTED), marked)

    def test_a_withheld_terminator_fits_before_and_after_the_commit_point(self) -> None:
        for path in ([prepared(), claimed(), ATTEMPT], [prepared(), claimed(), ATTEMPT, COMMIT]):
            assert TERMINATOR_WITHHELD == decide(intent(TERMINATOR_WITHHELD), chain(path))

    def test_an_earlier_try_that_landed_is_done(self) -> None:
        stream = chain([prepared(), claimed(), ATTEMPT, COMMIT, ACCEPTED])
        landed = msgspec.structs.replace(intent(ACCEPTED), eid=EIDS[5])
        assert "done" == decide(landed, stream)

    def test_an_unanswered_claim_that_never_landed_owes_nothing(self) -> None:
        aborted, _ = NOT_ATTEMPTED
        assert "done" == decide(intent(aborted, claim="77" * 16), chain([prepared()]))
        ours = chain([prepared(), claimed()])
        assert aborted == decide(intent(aborted, claim=EIDS[2]), ours)

    def test_a_filing_result_is_owed_only_when_the_filing_started(self) -> None:
        accepted = [prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED]
        assert "done" == decide(intent(FILING_FAILED), chain(accepted))
        filing = chain([*accepted, FILING_STARTED])
        assert FILING_FAILED == decide(intent(FILING_FAILED), filing)

    def test_a_gone_stream_owes_nothing(self) -> None:
        assert "done" == decide(intent(ACCEPTED, late=LATE), [])


class TestTheJournalRecord:
    def test_an_intent_round_trips(self) -> None:
        aborted, refused = NOT_ATTEMPTED
        for owed in (intent(ACCEPTED, late=LATE), intent(aborted, refused, claim=EIDS[2])):
            assert owed == CloseIntent.from_json(owed.to_json())
