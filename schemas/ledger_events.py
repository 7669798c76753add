"""The send ledger's events: canonical scalars, one Struct per event type,
and the catalogue sets the state machine and the scripts use.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from schemas.send_policy import ApprovalMode, RequiredApproval
from schemas.submission import FinalStage, MaybeSentCause, NetworkStage, SmtpRejectReason

# ---------------------------------------------------------------------------------------------
# Scalars of the canonical form

MAX_INT: Final = 2**53 - 1
MAX_MESSAGE_ID_BYTES: Final = 997
MAX_ENTRIES: Final = 128  # a stream with more entries is corrupt

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
# The Message-ID validator, restricted to the canonical alphabet (no `"` or `\` anywhere).
MESSAGE_ID_PATTERN: Final = rf"^<{_DOT_ATOM}@(?:{_DOT_ATOM}|\[[!#-Z^-~]*\])>$"

Int53 = Annotated[int, Meta(ge=0, le=MAX_INT)]
Hex32 = Annotated[str, Meta(pattern="^[0-9a-f]{32}$")]
Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
MessageId = Annotated[str, Meta(pattern=MESSAGE_ID_PATTERN, max_length=MAX_MESSAGE_ID_BYTES)]
Actor = Annotated[
    str, Meta(pattern=r"^(api|dispatcher|recovery|sweeper|operator):[A-Za-z0-9._-]{1,64}$")
]
Endpoint = Annotated[str, Meta(pattern=r"^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$")]
EnhancedStatus = Annotated[str, Meta(pattern=r"^(|[245]\.[0-9]{1,3}\.[0-9]{1,3})$")]
ReplyCode = Annotated[int, Meta(ge=0, le=599)]
Uid32 = Annotated[int, Meta(ge=1, le=4_294_967_295)]
GraphId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_=-]{1,1024}$")]

Transport = Literal["smtp", "microsoft_graph"]
PrepareAction = Literal["new", "reply", "reply_all", "forward", "draft"]
SmtpStage = Literal["not_attempted", NetworkStage]
PublicStatus = Literal["prepared", "sending", "accepted", "rejected", "unknown", "expired"]
SentFiling = Literal["pending", "saved", "failed", "unknown", "skipped"]

# ---------------------------------------------------------------------------------------------
# Event data. Every class names its event type; fields are exactly the catalogue's.


class _Data(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every event's `data` object."""

    TYPE: ClassVar[str] = ""
    ANNOTATION: ClassVar[bool] = False


class Prepared(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


# A client's self-reported name or version: canonical printable ASCII (no `"` or `\\`).
ClientText = Annotated[str, Meta(pattern=r"^[ !#-\[\]-~]*$", max_length=100)]
# A protocol revision (`2025-06-18`), or "" when unknown: one pattern, since msgspec checks a
# constrained str before a Literal of the same str type and would refuse "".
ProtocolVersion = Annotated[str, Meta(pattern=r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$")]
ApprovalRefusal = Literal[
    "declined",
    "cancelled",
    "malformed_answer",
    "state_invalid",
    "state_expired",
    "state_replayed",
    "timed_out",
]


class Approved(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


class Claimed(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


class DispatchAborted(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


class SmtpAttemptStarted(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Durable before any TCP connection (I3)."""

    TYPE = "smtp_attempt_started"
    transport: Transport
    endpoint: Endpoint
    tls_mode: Literal["tls", "starttls", "https"]
    auth: Literal["plain", "xoauth2", "graph_oauth"]


class SmtpCommitPoint(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Durable before the end-of-data marker or the Graph POST (I4)."""

    TYPE = "smtp_commit_point"
    wire_bytes: Int53
    raw_sha256: Hex64


class SmtpAccepted(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The provider accepted the submission (not delivery)."""

    TYPE = "smtp_accepted"
    stage: Literal["acknowledgement", "graph_submission"]
    reply_code: Annotated[int, Meta(ge=200, le=299)]
    enhanced_status: EnhancedStatus


class SmtpRejected(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The attempt is recorded as not accepted."""

    TYPE = "smtp_rejected"
    stage: SmtpStage
    reply_code: ReplyCode
    enhanced_status: EnhancedStatus
    network_contacted: bool
    reason: Literal[
        SmtpRejectReason, "aborted_before_connect", "aborted_before_terminator", "http_4xx"
    ]


class SmtpOutcomeUnknown(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The submission may or may not have been accepted; never resend."""

    TYPE = "smtp_outcome_unknown"
    stage: FinalStage
    cause: Literal[MaybeSentCause, "internal_error"]


class SentFilingStarted(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The Sent copy is about to be appended."""

    TYPE = "sent_filing_started"
    mailbox_role: Literal["sent"]


class SentFilingSucceeded(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The Sent copy was appended."""

    TYPE = "sent_filing_succeeded"
    destination_known: bool
    uid_validity: Uid32 | UnsetType = UNSET
    uid: Uid32 | UnsetType = UNSET


class SentFilingFailed(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


class Expired(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """An unclaimed preparation passed its deadline; the payload is deleted."""

    TYPE = "expired"
    reason: Literal["deadline_passed"]


class RecoveryClassified(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Recovery closed an abandoned dispatch from its last durable event."""

    TYPE = "recovery_classified"
    classification: Literal["not_attempted", "not_submitted", "unknown"]
    stage: Literal["not_attempted", "interrupted", "acknowledgement", "graph_submission"]
    claim_age_ms: Int53
    last_lifecycle_type: Literal["claimed", "smtp_attempt_started", "smtp_commit_point"]


class RollbackQuarantined(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


class ApprovalRequested(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a person was asked to approve; a one-time answer is bound to this request."""

    TYPE = "approval_requested"
    ANNOTATION = True
    mode: ApprovalMode
    shown_sha256: Hex64
    nonce_sha256: Hex64  # the answer must carry the nonce whose hash this is, once


class ApprovalRefused(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: an answer did not approve; nothing was consumed and nothing was sent."""

    TYPE = "approval_refused"
    ANNOTATION = True
    mode: ApprovalMode
    reason: ApprovalRefusal
    # The request it answers (its approval_requested's nonce_sha256), when the answer named one:
    # a request is answered once, and a stale answer never uses up a newer request.
    nonce_sha256: Hex64 | UnsetType = UNSET


class ConfirmRefused(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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
        "approval_unavailable",
        "recipient_not_allowed",
        "rate_limited",
    ]


class DuplicateConfirm(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a consumed ID was confirmed again and replayed."""

    TYPE = "duplicate_confirm"
    ANNOTATION = True
    observed_status: PublicStatus


class DispatchQueued(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: the claimed message waits for a free SMTP connection; nothing is sent yet."""

    TYPE = "dispatch_queued"
    ANNOTATION = True
    connections: Annotated[int, Meta(ge=1, le=MAX_INT)]  # the process's SMTP_MAX_CONNECTIONS
    ahead: Int53  # dispatches of this process already waiting


class LateOutcomeObserved(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a definitive outcome arrived after recovery had closed the dispatch."""

    TYPE = "late_outcome_observed"
    ANNOTATION = True
    outcome: Literal["accepted", "rejected", "unknown"]
    stage: SmtpStage
    reply_code: ReplyCode


# The operator's own words: printable ASCII without `"` or `\\` (the canonical alphabet).
ResolutionNote = Annotated[str, Meta(pattern=r"^[ !#-\[\]-~]*$", max_length=500)]


class OperatorResolution(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A person recorded what they found out about a settled send; the send never reopens."""

    TYPE = "operator_resolution"
    outcome: Literal["arrived", "not_arrived", "unknown"]
    note: ResolutionNote
    reprepared_as: Hex32 | UnsetType = UNSET


class OutcomeEvidence(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
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
DATA_CLASSES: Final[dict[str, type[_Data]]] = {
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
