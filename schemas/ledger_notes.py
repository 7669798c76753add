"""The ledger's annotations: notes on a send that never move its lifecycle."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, UnsetType

from schemas.ledger_scalars import (
    MAX_INT,
    ApprovalRefusal,
    EventDataBase,
    Hex64,
    Int53,
    PublicStatus,
    ReplyCode,
    SmtpStage,
)
from schemas.send_policy import ApprovalMode


class ApprovalRequested(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a person was asked to approve; a one-time answer is bound to this request."""

    TYPE = "approval_requested"
    ANNOTATION = True
    mode: ApprovalMode
    shown_sha256: Hex64
    nonce_sha256: Hex64  # the answer must carry the nonce whose hash this is, once


class ApprovalRefused(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: an answer did not approve; nothing was consumed and nothing was sent."""

    TYPE = "approval_refused"
    ANNOTATION = True
    mode: ApprovalMode
    reason: ApprovalRefusal
    # The request it answers (its approval_requested's nonce_sha256), when the answer named one:
    # a request is answered once, and a stale answer never uses up a newer request.
    nonce_sha256: Hex64 | UnsetType = UNSET


class ConfirmRefused(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a confirm was refused without consuming anything."""

    TYPE = "confirm_refused"
    ANNOTATION = True
    reason: Literal[
        "digest_mismatch",
        "expired",
        "owner_mismatch",
        "grant_mismatch",
        "payload_missing",
        "approval_missing",
        "recipient_not_allowed",
        "rate_limited",
    ]


class DuplicateConfirm(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a consumed ID was confirmed again and replayed."""

    TYPE = "duplicate_confirm"
    ANNOTATION = True
    observed_status: PublicStatus


class DispatchQueued(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: the claimed message waits for a free SMTP connection; nothing is sent yet."""

    TYPE = "dispatch_queued"
    ANNOTATION = True
    connections: Annotated[int, Meta(ge=1, le=MAX_INT)]  # the process's SMTP_MAX_CONNECTIONS
    ahead: Int53  # dispatches of this process already waiting


class LateOutcomeObserved(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a definitive outcome arrived after recovery had closed the dispatch."""

    TYPE = "late_outcome_observed"
    ANNOTATION = True
    outcome: Literal["accepted", "rejected", "unknown"]
    stage: SmtpStage
    reply_code: ReplyCode
