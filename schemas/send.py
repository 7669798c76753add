"""Results of mail_send_confirmed."""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct, UnsetType, field

REPLAY_WARNING = (
    "This preparation was already consumed; nothing was sent now. Never resend automatically: "
    "check send_status, the Sent folder or the recipient before any new preparation."
)
UNCERTAIN_WARNING = (
    "Submission did not complete normally; inspect send_status and do not retry blindly."
)
PENDING_WARNING = (
    "The send is still in progress past the tool deadline; it continues in the background. "
    "Check send_status; never resend or prepare a duplicate."
)
PERSISTENCE_WARNING = (
    "The ledger store has not recorded this outcome yet; it is kept and recorded when the store "
    "answers again. The ID stays consumed. Do not resend."
)
SENT_COPY_WARNING = (
    "SMTP accepted the message but the Sent copy failed; the message was sent, do not resend."
)
NOTHING_SENT_WARNING = "Nothing was sent and this preparation is consumed; prepare again if needed."


class SendResult(Struct, kw_only=True):
    """The answer to a fresh dispatch: acceptance is not delivery."""

    status: Literal["accepted", "rejected", "unknown", "sending"]
    stage: str | UnsetType = UNSET
    message_id: str
    warnings: list[str] = field(default_factory=list)
    delivery_verified: Literal[False] = False
    queued: Literal[True] | UnsetType = UNSET  # sending, still waiting for an SMTP connection


class ReplayResult(Struct, kw_only=True):
    """The answer to a confirm of an already consumed preparation: no network contact."""

    status: str
    message_id: str
    resent: Literal[False] = False
    warning: str = REPLAY_WARNING
