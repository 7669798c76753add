"""The send ledger's wire truth: every event, its canonical bytes,
the private payload, the stored entry, and the typed errors of the ledger room.

Canonical form: only objects, arrays, printable-ASCII strings without `"` or `\\`, booleans and
integers 0 <= n < 2^53; keys sorted; no whitespace. Writers encode a validated Struct with
`order="sorted"` and then prove that strict decoding and re-encoding give the same bytes.

`decode_linked` is decode_event for a chain walk. Measured with bench/audit_fold.py (callgrind):
msgspec checks a string pattern through a Python-level call, ~4,400 instructions each, a quarter
of an audit's work; most envelope patterns re-check what the walk already knows (the stream's
pid, the previous verified hash, actors that repeat), so it skips exactly those.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Final, Literal, cast

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from schemas.errors import OperationFailed, ServiceUnavailable
from schemas.ledger_events import (
    DATA_CLASSES,
    MAX_ENTRIES,
    Actor,
    EventData,
    EventType,
    Hex32,
    Hex64,
    Int53,
    PrepareAction,
    Prepared,
    SentFiling,
    Transport,
)
from schemas.send_policy import RequiredApproval

# ---------------------------------------------------------------------------------------------
# Envelope and canonical encoding


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


class _LinkedIn(_EnvelopeIn, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The envelope less the patterns of the fields decode_linked proves by other means."""

    pid: str
    prev: str
    actor: str


_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_ENVELOPE_DECODER: Final = msgspec.json.Decoder(_EnvelopeIn)
_LINKED_DECODER: Final = msgspec.json.Decoder(_LinkedIn)
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
    event = _event_of(envelope, data)
    if _ENCODER.encode(event) != raw:
        raise EventRejected("the event bytes are not in canonical form")
    return event


def decode_linked(raw: bytes, pid: str | None, prev: str | None) -> Event:
    """Decode like decode_event (same event, same EventRejected) within a stream being walked.

    `pid` and `prev` are what the event must carry, given only when known to fit Hex32 and
    Hex64 (a pid that passed pid_fits; the genesis or a verified hash); None makes this
    decode_event.
    """
    try:
        envelope = _LINKED_DECODER.decode(raw)
        data = _DATA_DECODERS[envelope.type].decode(envelope.data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return decode_event(raw)  # refuses it in its own words
    # Equal to values that fit their patterns, these fit them too; anything else is checked
    # by the strict decoder, so nothing is accepted that decode_event would refuse.
    if envelope.prev != prev or envelope.pid != pid:
        return decode_event(raw)
    if envelope.actor not in _ACTORS and not _actor_fits(envelope.actor):
        return decode_event(raw)
    event = _event_of(envelope, data)
    if _ENCODER.encode(event) != raw:
        return decode_event(raw)
    return event


def pid_fits(pid: str) -> bool:
    """Tell whether a text fits the events' pid pattern (Hex32)."""
    return _fits(pid, Hex32)


# Actors that fit their pattern: a ledger has few (one per process), each is checked once.
_ACTORS: Final[set[str]] = set()
_ACTORS_KEPT: Final = 4096


def _actor_fits(actor: str) -> bool:
    if not _fits(actor, Actor):
        return False
    if len(_ACTORS) >= _ACTORS_KEPT:
        _ACTORS.clear()
    _ACTORS.add(actor)
    return True


def _fits(value: str, constrained: object) -> bool:
    try:
        msgspec.convert(value, constrained)
    except msgspec.ValidationError:
        return False
    return True


def _event_of(envelope: _EnvelopeIn, data: object) -> Event:
    return Event(
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


def _where(exc: msgspec.ValidationError, root: str) -> str:
    # Only the JSON path: msgspec's own text can quote the offending value (e.g. enum values).
    _, sep, path = str(exc).rpartition(" - at `$")
    return f"constraint failed at `{root}{path}" if sep else f"constraint failed in `{root}`"


# ---------------------------------------------------------------------------------------------
# Stored entry — also the export line of `angelos ledger export`


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
# Private payload: msgpack, never part of the ledger


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
    grant: str | UnsetType = UNSET  # first-party mode: the principal's grant binding
    # The send policy in force at prepare, frozen into the `prepared` event (see Prepared).
    approval: RequiredApproval | UnsetType = UNSET
    allowlist_sha256: str | UnsetType = UNSET


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


def decode_unclaimed(blob: bytes, pid: str, prepared: Prepared) -> PreparedPayload:
    """Decode an unclaimed preparation's payload, read without consuming it, and check it is
    the one its `prepared` event names (bytes, ID, owner, digest); LedgerCorrupt otherwise."""
    if hashlib.sha256(blob).hexdigest() != prepared.payload_sha256:
        raise LedgerCorrupt("the stored payload is not the prepared one")
    payload = decode_payload(blob)
    if (payload.pid, payload.owner, payload.digest) != (pid, prepared.owner, prepared.digest):
        raise LedgerCorrupt("the stored payload is not the prepared one")
    return payload


# ---------------------------------------------------------------------------------------------
# Errors of the ledger room


class LedgerCorrupt(OperationFailed):
    """A stored ledger record failed its integrity checks; nothing was changed or guessed."""

    default_message = "the send ledger record failed its integrity checks"


class InvalidTransition(LedgerCorrupt):
    """An event does not follow the lifecycle state machine."""

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
        "store_rollback",
    }
)


class SendStatusResult(Struct, frozen=True, kw_only=True):
    """The `send_status` answer; `unavailable` carries only status, delivery_verified,
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
    queued: Literal[True] | UnsetType = UNSET  # sending, waiting for a free SMTP connection
    # The owner's latest recorded finding (`angelos ledger resolve`); the status stays.
    resolution: Literal["arrived", "not_arrived", "unknown"] | UnsetType = UNSET
    # Accepted by evidence rather than by a recorded reply (`angelos ledger evidence`, or
    # recovery): the provider's own copy in its Sent folder, and whether its bytes are the ones
    # submitted (false when the provider rewrote them).
    evidence: Literal["sent_copy"] | UnsetType = UNSET
    evidence_identical: bool | UnsetType = UNSET
    # The preparation requires a person's approval: still `required`, or `approved` (by
    # `elicitation` or `passkey`); absent when it requires none.
    approval: Literal["required", "elicitation", "passkey"] | UnsetType = UNSET


UNAVAILABLE: Final = SendStatusResult(status="unavailable")


class SelfCheckReport(Struct, frozen=True, kw_only=True):
    """The store's startup self-check: whether sending may use this store, and why not."""

    usable: bool
    reason: str
    durability_mode: Literal["aof_always", "waitaof", "provider_managed", "none"]
    version: str
    waitaof: bool
    store_id: str = ""  # the ledger's id (meta.store_id), known when the check read the meta
    durability_only: bool = False  # only the durability settings failed; they may yet hold
