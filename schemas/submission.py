"""What an SMTP submission is given and what it can conclude.

The exception classes say what the caller may conclude by type alone: `NotSent` means the
message was provably not submitted (the end-of-data marker never left, or the server answered
it with an explicit 4xx/5xx); `MaybeSent` means the marker left and no definite answer came back,
so the message must never be submitted again. Their texts carry our own vocabulary only — never
the server's reply text, an address, a credential or message content.
"""

from __future__ import annotations

from typing import Literal, get_args

from msgspec import Struct

# The stage whose request can submit the message: past its commit point, never repeated.
FinalStage = Literal["acknowledgement", "graph_submission"]
# The network stages of a submission: the SMTP ones up to the reply to the end-of-data marker,
# or Graph's one send request.
NetworkStage = Literal["connection", "authentication", "envelope", "data", FinalStage]
# Where a submission that was not accepted ended: "validation" for checks before any network.
SubmissionStage = Literal["validation", NetworkStage]
NOT_SENT_STAGES = frozenset(get_args(SubmissionStage))
# smtp_rejected.reason: the part an SMTP submission itself can report.
SmtpRejectReason = Literal[
    "connect_failed",
    "tls_failed",
    "starttls_unavailable",
    "auth_unavailable",
    "auth_failed",
    "sender_refused",
    "recipient_refused",
    "data_refused",
    "body_write_failed",
    "final_reply_negative",
]
NotSentReason = Literal["local_validation", SmtpRejectReason, "http_4xx"]
NOT_SENT_REASONS = frozenset(get_args(NotSentReason))
# Why a submission's outcome is unknown (smtp_outcome_unknown.cause, "internal_error" aside):
# the SMTP causes, then Graph's (a 5xx, a status Graph never gives for a send, a lost exchange).
MaybeSentCause = Literal[
    "final_reply_timeout",
    "connection_lost",
    "malformed_reply",
    "http_5xx",
    "http_unexpected_status",
    "transport_error",
]
MAYBE_SENT_CAUSES = frozenset(get_args(MaybeSentCause))


# How the submission logged in, as `smtp_attempt_started` records it.
SmtpAuth = Literal["plain", "xoauth2", "graph_oauth"]


class Envelope(Struct, frozen=True):
    """The SMTP envelope: MAIL FROM and every RCPT TO, as bare ASCII mailboxes."""

    mail_from: str
    recipients: tuple[str, ...]


class SmtpEndpoint(Struct, frozen=True):
    """Where a submission goes, as recorded in `smtp_attempt_started` (configuration only)."""

    host: str
    port: int
    tls_mode: Literal["tls", "starttls", "https"]
    auth: SmtpAuth
    transport: Literal["smtp", "microsoft_graph"] = "smtp"


class FinalReply(Struct, frozen=True):
    """The server's 2xx answer to the end-of-data marker: code and enhanced status, no text."""

    code: int
    enhanced_status: str


class SubmissionError(Exception):
    """Base of both submission outcomes that are not an acceptance; `stage` says where it ended."""

    stage: SubmissionStage


class NotSent(SubmissionError):
    """The message was provably not submitted: a new preparation is safe."""

    reason: NotSentReason
    reply_code: int
    enhanced_status: str
    network_contacted: bool

    def __init__(
        self,
        stage: SubmissionStage,
        reason: NotSentReason,
        reply_code: int = 0,
        enhanced_status: str = "",
        network_contacted: bool = True,
    ) -> None:
        if stage not in NOT_SENT_STAGES:
            raise ValueError(f"unknown submission stage {stage!r}")
        if reason not in NOT_SENT_REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")
        self.stage = stage
        self.reason = reason
        self.reply_code = reply_code
        self.enhanced_status = enhanced_status
        self.network_contacted = network_contacted
        detail = f" (reply {reply_code}{' ' + enhanced_status if enhanced_status else ''})"
        super().__init__(
            f"not sent: {reason} at stage {stage}{detail if reply_code else ''}",
        )

    def __reduce__(self) -> tuple[object, ...]:
        args = (self.stage, self.reason, self.reply_code, self.enhanced_status)
        return (NotSent, (*args, self.network_contacted))

    def __repr__(self) -> str:
        return (
            f"NotSent(stage={self.stage!r}, reason={self.reason!r}, reply_code={self.reply_code},"
            f" enhanced_status={self.enhanced_status!r},"
            f" network_contacted={self.network_contacted})"
        )


class MaybeSent(SubmissionError):
    """The final request (end-of-data, Graph send) left with no definite answer: never resend."""

    stage: FinalStage
    cause: MaybeSentCause

    def __init__(self, stage: FinalStage, cause: MaybeSentCause) -> None:
        if stage not in ("acknowledgement", "graph_submission"):
            raise ValueError(f"an unknown outcome cannot happen at stage {stage!r}")
        if cause not in MAYBE_SENT_CAUSES:
            raise ValueError(f"unknown outcome cause {cause!r}")
        self.stage = stage
        self.cause = cause
        super().__init__(f"outcome unknown: {cause} at stage {stage}; do not resend")

    def __reduce__(self) -> tuple[object, ...]:
        return (MaybeSent, (self.stage, self.cause))

    def __repr__(self) -> str:
        return f"MaybeSent(stage={self.stage!r}, cause={self.cause!r})"
