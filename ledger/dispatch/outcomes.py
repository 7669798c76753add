"""The closing ledger event of a dispatch: what a finished SMTP submission maps to, and what a
dispatch owes when it stopped before a network step."""

from __future__ import annotations

import asyncio
from typing import Literal

from ledger.dispatch.submitter import Submission
from schemas.ledger_events import (
    DispatchAborted,
    LateOutcomeObserved,
    SmtpAccepted,
    SmtpOutcomeUnknown,
    SmtpRejected,
    SmtpStage,
)
from schemas.submission import MaybeSent, NotSent

TerminalOutcome = SmtpAccepted | SmtpRejected | SmtpOutcomeUnknown
OutcomeStatus = Literal["accepted", "rejected", "unknown"]
# What a dispatch that stopped before any connection owes, whether or not its attempt marker
# landed: the first fits a stream still CLAIMED, the second one whose marker is there.
NOT_ATTEMPTED = (
    DispatchAborted(stage="not_attempted", reason="attempt_record_failed", network_contacted=False),
    SmtpRejected(
        stage="not_attempted", reply_code=0, enhanced_status="", network_contacted=False,
        reason="aborted_before_connect",
    ),
)  # fmt: skip
TERMINATOR_WITHHELD = SmtpRejected(
    stage="data", reply_code=0, enhanced_status="", network_contacted=True,
    reason="aborted_before_terminator",
)  # fmt: skip


async def finish(submission: Submission) -> TerminalOutcome:
    """Make the final request (SMTP's terminator, Graph's send) and classify what came back."""
    stage = submission.stage
    try:
        reply = await submission.commit()
    except NotSent as exc:
        if exc.stage == stage:
            return rejected(exc)
        # The connection was gone before the terminator left: provably not submitted.
        return SmtpRejected(
            stage="data", reply_code=0, enhanced_status="", network_contacted=True,
            reason="aborted_before_terminator",
        )  # fmt: skip
    except MaybeSent as exc:
        return SmtpOutcomeUnknown(stage=stage, cause=exc.cause)
    except (Exception, asyncio.CancelledError):
        return SmtpOutcomeUnknown(stage=stage, cause="internal_error")
    return SmtpAccepted(stage=stage, reply_code=reply.code, enhanced_status=reply.enhanced_status)


def rejected(exc: NotSent) -> SmtpRejected:
    """Translate a NotSent into its smtp_rejected event (no reply text, ever)."""
    if exc.stage == "validation" or exc.reason == "local_validation":
        # The submission's own last check refused the message before any connection.
        return SmtpRejected(
            stage="not_attempted", reply_code=0, enhanced_status="", network_contacted=False,
            reason="aborted_before_connect",
        )  # fmt: skip
    return SmtpRejected(
        stage=exc.stage,
        reply_code=exc.reply_code,
        enhanced_status=exc.enhanced_status,
        network_contacted=exc.network_contacted,
        reason=exc.reason,
    )


def status_of(outcome: TerminalOutcome) -> OutcomeStatus:
    """Map a terminal event to its public status."""
    if isinstance(outcome, SmtpAccepted):
        return "accepted"
    if isinstance(outcome, SmtpRejected):
        return "rejected"
    return "unknown"


def stage_of(outcome: TerminalOutcome) -> SmtpStage:
    """Return the stage a terminal event records."""
    return outcome.stage


def late_note(outcome: TerminalOutcome) -> LateOutcomeObserved:
    """The annotation a verdict becomes when recovery closed the dispatch first."""
    return LateOutcomeObserved(
        outcome=status_of(outcome),
        stage=stage_of(outcome),
        reply_code=0 if isinstance(outcome, SmtpOutcomeUnknown) else outcome.reply_code,
    )
