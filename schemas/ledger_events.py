"""The send ledger's events: one Struct per lifecycle event type, and the catalogue sets the
state machine and the scripts use; the scalars (ledger_scalars) and annotations (ledger_notes)
are re-exported here, so every event name has one home to import from.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from msgspec import UNSET, Meta, UnsetType

from schemas.ledger_notes import (
    ApprovalRefused,
    ApprovalRequested,
    ConfirmRefused,
    DispatchQueued,
    DuplicateConfirm,
    LateOutcomeObserved,
)
from schemas.ledger_scalars import (
    MAX_ENTRIES,
    MAX_INT,
    MAX_MESSAGE_ID_BYTES,
    MESSAGE_ID_PATTERN,
    Actor,
    ApprovalRefusal,
    ClientText,
    Endpoint,
    EnhancedStatus,
    EventDataBase,
    GraphId,
    Hex32,
    Hex64,
    Int53,
    MessageId,
    PrepareAction,
    ProtocolVersion,
    PublicStatus,
    ReplyCode,
    ResolutionNote,
    SentFiling,
    SmtpStage,
    Transport,
    Uid32,
)
from schemas.send_policy import ApprovalMode, RequiredApproval
from schemas.submission import FinalStage, MaybeSentCause, SmtpRejectReason

# ---------------------------------------------------------------------------------------------
# Event data. Every class names its event type; fields are exactly the catalogue's.


class Prepared(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """seq 1: a preparation exists, bound to its owner and digest (and, first-party, its grant)."""

    TYPE = "prepared"
    owner: Hex64
    digest: Hex64
    message_id: MessageId
    transport: Transport
    action: PrepareAction
    created_ms: Int53
    expires_ms: Int53
    encoded_bytes: Int53
    recipient_count: Int53
    attachment_sha256: tuple[Hex64, ...]
    payload_sha256: Hex64
    # First-party mode: the binding of the grant whose token prepared it (never the grant ID).
    grant: Hex64 | UnsetType = UNSET
    retention_ms: Int53 | UnsetType = UNSET  # how long the stream is kept after its last event
    # The owner's send policy frozen at prepare: the human approval the claim requires (absent:
    # none), and the SHA-256 of the recipient allowlist the recipients were checked against.
    approval: RequiredApproval | UnsetType = UNSET
    allowlist_sha256: Hex64 | UnsetType = UNSET


class Approved(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A person approved this preparation, as its `approval` required, before any claim."""

    TYPE = "approved"
    mode: ApprovalMode
    # The MCP client that asked (elicitation), or the one that prepared (passkey), as it named
    # itself, and the protocol revision of the call: "" when unknown.
    client_name: ClientText
    client_version: ClientText
    protocol: ProtocolVersion
    shown_sha256: Hex64  # of the exact text the person saw
    credential_sha256: Hex64 | UnsetType = UNSET  # the passkey's credential ID, hashed


class Claimed(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The one-time claim: the preparation is consumed."""

    TYPE = "claimed"
    dispatcher_id: Hex32
    claim_token: Hex32
    confirmed_digest: Hex64
    append_sent: bool
    # The rules in force at the claim, so an audit judges this send by them, not by the
    # auditor's environment (absent from claims written before they were recorded).
    dispatch_deadline_ms: Int53 | UnsetType = UNSET
    recovery_grace_ms: Int53 | UnsetType = UNSET


class DispatchAborted(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The dispatcher stopped before any network contact."""

    TYPE = "dispatch_aborted"
    stage: Literal["integrity_validation", "validation", "not_attempted"]
    reason: Literal[
        "digest_mismatch",
        "id_mismatch",
        "payload_hash_mismatch",
        "transport_mismatch",
        "expired_at_dispatch",
        "local_validation",
        "claim_ack_lost",
        "durability_unconfirmed",
        "attempt_record_failed",
        "deadline_exceeded",
        "shutdown",
    ]
    network_contacted: Literal[False]


class SmtpAttemptStarted(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Durable before any TCP connection (I3)."""

    TYPE = "smtp_attempt_started"
    transport: Transport
    endpoint: Endpoint
    tls_mode: Literal["tls", "starttls", "https"]
    auth: Literal["plain", "xoauth2", "graph_oauth"]


class SmtpCommitPoint(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Durable before the end-of-data marker or the Graph POST (I4)."""

    TYPE = "smtp_commit_point"
    wire_bytes: Int53
    raw_sha256: Hex64


class SmtpAccepted(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The provider accepted the submission (not delivery)."""

    TYPE = "smtp_accepted"
    stage: Literal["acknowledgement", "graph_submission"]
    reply_code: Annotated[int, Meta(ge=200, le=299)]
    enhanced_status: EnhancedStatus


class SmtpRejected(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The attempt is recorded as not accepted."""

    TYPE = "smtp_rejected"
    stage: SmtpStage
    reply_code: ReplyCode
    enhanced_status: EnhancedStatus
    network_contacted: bool
    reason: Literal[
        SmtpRejectReason, "aborted_before_connect", "aborted_before_terminator", "http_4xx"
    ]


class SmtpOutcomeUnknown(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The submission may or may not have been accepted; never resend."""

    TYPE = "smtp_outcome_unknown"
    stage: FinalStage
    cause: Literal[MaybeSentCause, "internal_error"]


class SentFilingStarted(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The Sent copy is about to be appended."""

    TYPE = "sent_filing_started"
    mailbox_role: Literal["sent"]


class SentFilingSucceeded(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The Sent copy was appended."""

    TYPE = "sent_filing_succeeded"
    destination_known: bool
    uid_validity: Uid32 | UnsetType = UNSET
    uid: Uid32 | UnsetType = UNSET


class SentFilingFailed(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The Sent copy was not appended, or its outcome is unknown."""

    TYPE = "sent_filing_failed"
    outcome: Literal["not_applied", "rejected", "unknown"]
    reason: Literal[
        "no_unique_sent_folder",
        "imap_rejected",
        "connection_lost",
        "timeout",
        "provider_stores_sent",
        "process_lost",
        "store_unavailable",  # the filing start was not known to be recorded: no APPEND was made
    ]


class Expired(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """An unclaimed preparation passed its deadline; the payload is deleted."""

    TYPE = "expired"
    reason: Literal["deadline_passed"]


class RecoveryClassified(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Recovery closed an abandoned dispatch from its last durable event."""

    TYPE = "recovery_classified"
    classification: Literal["not_attempted", "not_submitted", "unknown"]
    stage: Literal["not_attempted", "interrupted", "acknowledgement", "graph_submission"]
    claim_age_ms: Int53
    last_lifecycle_type: Literal["claimed", "smtp_attempt_started", "smtp_commit_point"]


class RollbackQuarantined(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The store lost acknowledged writes: this open send's state cannot be trusted, so it ends.

    Written only while the ledger is halted for a detected rollback. The preparation may have
    been claimed, even sent, in the history the store forgot; it is never claimed again.
    """

    TYPE = "rollback_quarantined"
    last_lifecycle_type: Literal[
        "prepared", "approved", "claimed", "smtp_attempt_started", "smtp_commit_point"
    ]
    detected_ms: Int53  # Redis time of the detection
    store_clock: Int53  # the store's lifecycle clock when the rollback was found
    witness_clock: Int53  # the highest clock a process had seen and kept outside the store


class OperatorResolution(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A person recorded what they found out about a settled send; the send never reopens."""

    TYPE = "operator_resolution"
    outcome: Literal["arrived", "not_arrived", "unknown"]
    note: ResolutionNote
    reprepared_as: Hex32 | UnsetType = UNSET


class OutcomeEvidence(EventDataBase, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The provider's own copy of an unknown send was found: positive evidence it accepted it.

    Only a provider that files what it accepts (Gmail, Exchange) makes such a copy, and only
    for a message it took. The copy is found by the exact Message-ID of the preparation;
    `identical` says whether its bytes also hash to the commit point's `raw_sha256` (Exchange
    rewrites MIME, so a copy proven by Message-ID alone still counts, with identical false).
    No folder name, subject or address is kept: only where the copy sits and its hash.
    """

    TYPE = "outcome_evidence"
    source: Literal["sent_folder"]
    # Where the copy sits: its UIDVALIDITY and UID (IMAP), or its immutable ID (Graph).
    uid_validity: Uid32 | UnsetType = UNSET
    uid: Uid32 | UnsetType = UNSET
    graph_id: GraphId | UnsetType = UNSET
    # The SHA-256 of the copy's exact bytes; absent when the copy is larger than the read
    # limit (5 MiB), which no copy identical to a message angelos sent can be.
    sha256: Hex64 | UnsetType = UNSET
    identical: bool
    copies: Annotated[int, Meta(ge=1, le=MAX_INT)]  # copies with this Message-ID found

    def __post_init__(self) -> None:
        present = tuple(
            not isinstance(value, UnsetType)
            for value in (self.uid_validity, self.uid, self.graph_id)
        )
        if present not in ((True, True, False), (False, False, True)):
            raise ValueError("the copy is located by uid_validity and uid, or by graph_id alone")

    @property
    def where(self) -> str:
        """Where the copy sits, in words: UIDVALIDITY and UID, or the Graph message ID."""
        if isinstance(self.graph_id, str):
            return f"Microsoft Graph message {self.graph_id}"
        return f"UIDVALIDITY {self.uid_validity}, UID {self.uid}"


EventData = (
    Prepared
    | Approved
    | Claimed
    | DispatchAborted
    | SmtpAttemptStarted
    | SmtpCommitPoint
    | SmtpAccepted
    | SmtpRejected
    | SmtpOutcomeUnknown
    | SentFilingStarted
    | SentFilingSucceeded
    | SentFilingFailed
    | Expired
    | RecoveryClassified
    | RollbackQuarantined
    | ApprovalRequested
    | ApprovalRefused
    | ConfirmRefused
    | DuplicateConfirm
    | DispatchQueued
    | LateOutcomeObserved
    | OperatorResolution
    | OutcomeEvidence
)
DATA_CLASSES: Final[dict[str, type[EventDataBase]]] = {
    cls.TYPE: cls
    for cls in (
        Prepared,
        Approved,
        Claimed,
        DispatchAborted,
        SmtpAttemptStarted,
        SmtpCommitPoint,
        SmtpAccepted,
        SmtpRejected,
        SmtpOutcomeUnknown,
        SentFilingStarted,
        SentFilingSucceeded,
        SentFilingFailed,
        Expired,
        RecoveryClassified,
        RollbackQuarantined,
        ApprovalRequested,
        ApprovalRefused,
        ConfirmRefused,
        DuplicateConfirm,
        DispatchQueued,
        LateOutcomeObserved,
        OperatorResolution,
        OutcomeEvidence,
    )
}
EVENT_TYPES: Final = frozenset(DATA_CLASSES)
ANNOTATION_TYPES: Final = frozenset(t for t, cls in DATA_CLASSES.items() if cls.ANNOTATION)
DISPATCH_TERMINAL_TYPES: Final = frozenset(
    {
        "dispatch_aborted",
        "smtp_accepted",
        "smtp_rejected",
        "smtp_outcome_unknown",
        "recovery_classified",
        "rollback_quarantined",
    }
)
FILING_RESULT_TYPES: Final = frozenset({"sent_filing_succeeded", "sent_filing_failed"})
EventType = Literal[
    "prepared",
    "approved",
    "claimed",
    "dispatch_aborted",
    "smtp_attempt_started",
    "smtp_commit_point",
    "smtp_accepted",
    "smtp_rejected",
    "smtp_outcome_unknown",
    "sent_filing_started",
    "sent_filing_succeeded",
    "sent_filing_failed",
    "expired",
    "recovery_classified",
    "rollback_quarantined",
    "approval_requested",
    "approval_refused",
    "confirm_refused",
    "duplicate_confirm",
    "dispatch_queued",
    "late_outcome_observed",
    "operator_resolution",
    "outcome_evidence",
]

__all__ = [
    "ANNOTATION_TYPES",
    "DATA_CLASSES",
    "DISPATCH_TERMINAL_TYPES",
    "EVENT_TYPES",
    "FILING_RESULT_TYPES",
    "MAX_ENTRIES",
    "MAX_INT",
    "MAX_MESSAGE_ID_BYTES",
    "MESSAGE_ID_PATTERN",
    "Actor",
    "ApprovalRefusal",
    "ApprovalRefused",
    "ApprovalRequested",
    "Approved",
    "Claimed",
    "ClientText",
    "ConfirmRefused",
    "DispatchAborted",
    "DispatchQueued",
    "DuplicateConfirm",
    "Endpoint",
    "EnhancedStatus",
    "EventData",
    "EventDataBase",
    "EventType",
    "Expired",
    "GraphId",
    "Hex32",
    "Hex64",
    "Int53",
    "LateOutcomeObserved",
    "MessageId",
    "OperatorResolution",
    "OutcomeEvidence",
    "PrepareAction",
    "Prepared",
    "ProtocolVersion",
    "PublicStatus",
    "RecoveryClassified",
    "ReplyCode",
    "ResolutionNote",
    "RollbackQuarantined",
    "SentFiling",
    "SentFilingFailed",
    "SentFilingStarted",
    "SentFilingSucceeded",
    "SmtpAccepted",
    "SmtpAttemptStarted",
    "SmtpCommitPoint",
    "SmtpOutcomeUnknown",
    "SmtpRejected",
    "SmtpStage",
    "Transport",
    "Uid32",
]
