"""The send ledger's wire truth (spec/sending.md §8.4-§8.5): every event, its canonical bytes,
the private payload, the stored entry, and the typed errors of the ledger room.

Canonical form: only objects, arrays, printable-ASCII strings without `"` or `\\`, booleans and
integers 0 <= n < 2^53; keys sorted; no whitespace. Writers encode a validated Struct with
`order="sorted"` and then prove that strict decoding and re-encoding give the same bytes.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal, cast

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from schemas.errors import OperationFailed, ServiceUnavailable
from schemas.submission import SmtpRejectReason

# ---------------------------------------------------------------------------------------------
# Scalars of the canonical form

MAX_INT: Final = 2**53 - 1
MAX_MESSAGE_ID_BYTES: Final = 997
MAX_ENTRIES: Final = 128  # a stream with more entries is corrupt (§8.7)

# Printable ASCII 0x20-0x7E except `"` (0x22) and `\` (0x5C).
ASCII_PATTERN: Final = r"^[ !#-\[\]-~]*$"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
# §1.5 Message-ID validator, restricted to the canonical alphabet (no `"` or `\` anywhere).
MESSAGE_ID_PATTERN: Final = rf"^<{_DOT_ATOM}@(?:{_DOT_ATOM}|\[[!#-Z^-~]*\])>$"

Int53 = Annotated[int, Meta(ge=0, le=MAX_INT)]
Hex32 = Annotated[str, Meta(pattern="^[0-9a-f]{32}$")]
Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
MessageId = Annotated[str, Meta(pattern=MESSAGE_ID_PATTERN, max_length=MAX_MESSAGE_ID_BYTES)]
Actor = Annotated[str, Meta(pattern=r"^(api|dispatcher|recovery|sweeper):[A-Za-z0-9._-]{1,64}$")]
Endpoint = Annotated[str, Meta(pattern=r"^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$")]
EnhancedStatus = Annotated[str, Meta(pattern=r"^(|[245]\.[0-9]{1,3}\.[0-9]{1,3})$")]
ReplyCode = Annotated[int, Meta(ge=0, le=599)]
Uid32 = Annotated[int, Meta(ge=1, le=4_294_967_295)]

Transport = Literal["smtp", "microsoft_graph"]
PrepareAction = Literal["new", "reply", "reply_all", "forward", "draft"]
SmtpStage = Literal[
    "not_attempted",
    "connection",
    "authentication",
    "envelope",
    "data",
    "acknowledgement",
    "graph_submission",
]
PublicStatus = Literal["prepared", "sending", "accepted", "rejected", "unknown", "expired"]
SentFiling = Literal["pending", "saved", "failed", "unknown", "skipped"]

# ---------------------------------------------------------------------------------------------
# Event data (§8.5). Every class names its event type; fields are exactly the catalogue's.


class _Data(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every event's `data` object."""

    TYPE: ClassVar[str] = ""
    ANNOTATION: ClassVar[bool] = False


class Prepared(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """seq 1: a preparation exists, bound to its owner and digest."""

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


class Claimed(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The one-time claim: the preparation is consumed."""

    TYPE = "claimed"
    dispatcher_id: Hex32
    claim_token: Hex32
    confirmed_digest: Hex64
    append_sent: bool


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
    stage: Literal["acknowledgement", "graph_submission"]
    cause: Literal[
        "final_reply_timeout",
        "connection_lost",
        "malformed_reply",
        "http_5xx",
        "http_unexpected_status",
        "transport_error",
        "internal_error",
    ]


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


class ConfirmRefused(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a confirm was refused without consuming anything."""

    TYPE = "confirm_refused"
    ANNOTATION = True
    reason: Literal["digest_mismatch", "expired", "owner_mismatch", "payload_missing"]


class DuplicateConfirm(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a consumed ID was confirmed again and replayed."""

    TYPE = "duplicate_confirm"
    ANNOTATION = True
    observed_status: PublicStatus


class LateOutcomeObserved(_Data, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Annotation: a definitive outcome arrived after recovery had closed the dispatch."""

    TYPE = "late_outcome_observed"
    ANNOTATION = True
    outcome: Literal["accepted", "rejected", "unknown"]
    stage: SmtpStage
    reply_code: ReplyCode


EventData = (
    Prepared
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
    | ConfirmRefused
    | DuplicateConfirm
    | LateOutcomeObserved
)
DATA_CLASSES: Final[dict[str, type[_Data]]] = {
    cls.TYPE: cls
    for cls in (
        Prepared,
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
        ConfirmRefused,
        DuplicateConfirm,
        LateOutcomeObserved,
    )
}
EVENT_TYPES: Final = frozenset(DATA_CLASSES)
ANNOTATION_TYPES: Final = frozenset(t for t, cls in DATA_CLASSES.items() if cls.ANNOTATION)
LIFECYCLE_TYPES: Final = EVENT_TYPES - ANNOTATION_TYPES
DISPATCH_TERMINAL_TYPES: Final = frozenset(
    {
        "dispatch_aborted",
        "smtp_accepted",
        "smtp_rejected",
        "smtp_outcome_unknown",
        "recovery_classified",
    }
)
FILING_RESULT_TYPES: Final = frozenset({"sent_filing_succeeded", "sent_filing_failed"})
EventType = Literal[
    "prepared",
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
    "confirm_refused",
    "duplicate_confirm",
    "late_outcome_observed",
]

# ---------------------------------------------------------------------------------------------
# Envelope (§8.4.1) and canonical encoding (§8.4.2)


class Event(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ledger event; its canonical JSON bytes are what the chain hashes."""

    v: Literal[1] = 1
    pid: Hex32
    seq: Annotated[int, Meta(ge=1, le=MAX_ENTRIES)]
    type: EventType
    eid: Hex32
    prev: Hex64
    at_ms: Int53
    actor: Actor
    data: EventData


class _EnvelopeIn(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The envelope as decoded before its `data` is typed by `type`."""

    v: Literal[1]
    pid: Hex32
    seq: Annotated[int, Meta(ge=1, le=MAX_ENTRIES)]
    type: EventType
    eid: Hex32
    prev: Hex64
    at_ms: Int53
    actor: Actor
    data: msgspec.Raw


_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_ENVELOPE_DECODER: Final = msgspec.json.Decoder(_EnvelopeIn)
_DATA_DECODERS: Final = {t: msgspec.json.Decoder(cls) for t, cls in DATA_CLASSES.items()}


def encode_event(event: Event) -> bytes:
    """Return the canonical bytes of `event`, proven by a strict decode and re-encode."""
    if event.type != event.data.TYPE:
        raise EventRejected("the event type does not match its data")
    encoded = _ENCODER.encode(event)
    decode_event(encoded)  # validates every constraint and the byte-exact round trip
    return encoded


def decode_event(encoded: bytes | str) -> Event:
    """Decode canonical event bytes strictly; raise EventRejected unless they are canonical."""
    try:
        raw = encoded.encode("ascii") if isinstance(encoded, str) else encoded
    except UnicodeEncodeError:
        raise EventRejected("the event is not ASCII") from None
    try:
        envelope = _ENVELOPE_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise EventRejected(f"the event is not valid: {_where(exc, '$')}") from None
    except msgspec.DecodeError:
        raise EventRejected("the event is not well-formed JSON") from None
    try:
        data = _DATA_DECODERS[envelope.type].decode(envelope.data)
    except msgspec.ValidationError as exc:
        raise EventRejected(f"the event is not valid: {_where(exc, '$.data')}") from None
    event = Event(
        v=envelope.v,
        pid=envelope.pid,
        seq=envelope.seq,
        type=envelope.type,
        eid=envelope.eid,
        prev=envelope.prev,
        at_ms=envelope.at_ms,
        actor=envelope.actor,
        data=cast(EventData, data),
    )
    if _ENCODER.encode(event) != raw:
        raise EventRejected("the event bytes are not in canonical form")
    return event


def _where(exc: msgspec.ValidationError, root: str) -> str:
    # Only the JSON path: msgspec's own text can quote the offending value (e.g. enum values).
    _, sep, path = str(exc).rpartition(" - at `$")
    return f"constraint failed at `{root}{path}" if sep else f"constraint failed in `{root}`"


# ---------------------------------------------------------------------------------------------
# Stored entry (§8.4.3) — also the export line of §8.13


class LedgerEntry(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One stream entry as stored: canonical `e` verbatim, its hash and the unhashed server time."""

    pid: str
    id: str
    e: str
    h: str
    t: str
    eid: str
    srv_ms: int
    m: str | UnsetType = UNSET

    @property
    def seq(self) -> int:
        """Return the sequence number of the entry ID `0-<seq>`, or 0 when it is malformed."""
        head, _, tail = self.id.partition("-")
        return int(tail) if head == "0" and tail.isdigit() and tail[:1] != "0" else 0


# ---------------------------------------------------------------------------------------------
# Private payload (§8.4.4): msgpack, never part of the ledger


class PayloadAttachment(Struct, frozen=True, forbid_unknown_fields=True):
    """An outgoing attachment summary as shown in the preview."""

    filename: str
    content_type: str
    bytes: int
    sha256: str


class PreparedPayload(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Everything a dispatcher needs to submit the prepared message; deleted at claim."""

    v: Literal[1] = 1
    pid: str
    owner: str
    transport: Transport
    action: PrepareAction
    from_: str = field(name="from")
    to: tuple[str, ...]
    cc: tuple[str, ...]
    bcc: tuple[str, ...]
    subject: str
    text: str
    html: str
    attachments: tuple[PayloadAttachment, ...]
    message_id: str
    created_ms: int
    expires_ms: int
    raw: bytes
    recipients: tuple[str, ...]
    warnings: tuple[str, ...]
    digest: str


_PAYLOAD_ENCODER: Final = msgspec.msgpack.Encoder()
_PAYLOAD_DECODER: Final = msgspec.msgpack.Decoder(PreparedPayload)


def encode_payload(payload: PreparedPayload) -> bytes:
    """Return the msgpack bytes stored in the payload key."""
    return _PAYLOAD_ENCODER.encode(payload)


def decode_payload(blob: bytes) -> PreparedPayload:
    """Decode payload bytes; raise LedgerCorrupt when they are not a PreparedPayload."""
    try:
        return _PAYLOAD_DECODER.decode(blob)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise LedgerCorrupt("the stored payload is not readable") from None


# ---------------------------------------------------------------------------------------------
# Errors of the ledger room


class LedgerCorrupt(OperationFailed):
    """A stored ledger record failed its integrity checks; nothing was changed or guessed."""

    default_message = "the send ledger record failed its integrity checks"


class InvalidTransition(LedgerCorrupt):
    """An event does not follow the lifecycle state machine (§8.6)."""

    default_message = "the send ledger holds an invalid lifecycle transition"

    def __init__(self, state: str, event_type: str, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"invalid ledger transition {event_type} from {state}{detail}")
        self.state = state
        self.event_type = event_type


class EventRejected(OperationFailed, ValueError):
    """An event or value is outside the canonical form; nothing was written."""

    default_message = "the ledger event is not in canonical form"


class LedgerUnavailable(ServiceUnavailable):
    """The ledger store did not answer; `maybe_applied` tells whether a write may have landed."""

    default_message = "the send ledger store is unavailable"

    def __init__(self, message: str | None = None, *, maybe_applied: bool) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


# ---------------------------------------------------------------------------------------------
# Public answers


STATUS_WARNING: Final = (
    "Provider acceptance is not delivery. An unavailable or expired status is not proof of "
    "non-send. Never automatically resend or prepare a duplicate for sending/unknown messages."
)
PUBLIC_STAGES: Final = frozenset(
    {
        "validation",
        "integrity_validation",
        "connection",
        "authentication",
        "envelope",
        "data",
        "acknowledgement",
        "graph_submission",
        "not_attempted",
        "interrupted",
    }
)


class SendStatusResult(Struct, frozen=True, kw_only=True):
    """The `send_status` answer (§4.3); `unavailable` carries only status, delivery_verified,
    warning."""

    status: Literal[
        "prepared", "sending", "accepted", "rejected", "unknown", "expired", "unavailable"
    ]
    message_id: str | UnsetType = UNSET
    expires_at: str | UnsetType = UNSET
    stage: str | UnsetType = UNSET
    delivery_verified: Literal[False] = False
    warning: str = STATUS_WARNING
    sent_filing: SentFiling | UnsetType = UNSET
    recovered: Literal[True] | UnsetType = UNSET


UNAVAILABLE: Final = SendStatusResult(status="unavailable")


class SelfCheckReport(Struct, frozen=True, kw_only=True):
    """The §8.2 startup self-check: whether sending may use this store, and why not."""

    usable: bool
    reason: str
    durability_mode: Literal["aof_always", "waitaof", "provider_managed", "none"]
    version: str
    waitaof: bool
