"""The fast path of `verify`: one tight pass over a stream that is sound, or no verdict at all.

`sound_audit` checks everything the full audit checks (§8.13 items 1-10 for one stream) on the
stream's entries exactly as Redis replied them (bytes), but gives up, returning None, at the
first thing that is off or merely unusual; the caller then runs the full audit (ledger.audit),
so every finding and its wording come from one place. A verdict from here is therefore always
the verdict of a sound stream, equal to the full audit's.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Final, Literal, Union, cast

import msgspec
from msgspec import Meta, Struct

from ledger.audit import CLOSED_FROM, AuditRules, StreamAudit, investigate_reason
from ledger.chain import HASH_DOMAIN, event_mac, genesis
from ledger.lifecycle import TRANSITIONS, Rule, State, guards_hold
from schemas.ledger import PUBLIC_STAGES
from schemas.ledger_events import (
    ANNOTATION_TYPES,
    DATA_CLASSES,
    DISPATCH_TERMINAL_TYPES,
    MAX_ENTRIES,
    MAX_MESSAGE_ID_BYTES,
    Actor,
    Claimed,
    DispatchAborted,
    EventData,
    Hex32,
    Int53,
    Prepared,
    RecoveryClassified,
    SentFilingFailed,
    SmtpAccepted,
    SmtpOutcomeUnknown,
    SmtpRejected,
)

# A stream entry as hiredis parses XRANGE/XREAD: [id, [name, value, name, value, ...]], all bytes;
# an index entry likewise, with the fields pid, seq, t, h.
Entry = Sequence[Any]

_IDS: Final = tuple(b"0-%d" % n for n in range(MAX_ENTRIES + 1))
_SEQS: Final = tuple(b"%d" % n for n in range(MAX_ENTRIES + 1))
_PID_CHARS: Final = frozenset("0123456789abcdef")
_RULES: Final[dict[str, dict[str, Rule]]] = {}
for (_state, _kind), _rule in TRANSITIONS.items():
    _RULES.setdefault(_state, {})[_kind] = _rule
# public_status (ledger.projection) for the states a sound fold ends in; PREPARED depends on time.
_STATUS: Final = {
    "EXPIRED": "expired",
    "CLAIMED": "sending",
    "ATTEMPTING": "sending",
    "COMMITTED": "sending",
    "ACCEPTED": "accepted",
    "FILING": "accepted",
    "FILED": "accepted",
    "REJECTED": "rejected",
    "UNKNOWN": "unknown",
}
_STAGED: Final = (
    DispatchAborted,
    SmtpRejected,
    SmtpAccepted,
    SmtpOutcomeUnknown,
    RecoveryClassified,
)
_MAX_EXPIRES_MS: Final = 253_402_300_799_999  # as ledger.projection checks


class _Envelope(Struct, frozen=True, forbid_unknown_fields=True, gc=False, tag_field="type"):
    """The event envelope with its `type` as the tag that picks the data class.

    `pid` and `prev` are plain text here: the pass compares them with the stream's pid and the
    previous hash, which already fit the Hex32/Hex64 patterns, so equality implies the pattern.
    """

    KIND: ClassVar[str] = ""
    KIND_BYTES: ClassVar[bytes] = b""
    v: Literal[1]
    pid: str
    seq: Annotated[int, Meta(ge=1, le=MAX_ENTRIES)]
    eid: Hex32
    prev: str
    at_ms: Int53
    actor: Actor
    data: Any  # each tagged subclass narrows it to its data class


def _tagged(kind: str, data: type) -> type[_Envelope]:
    return cast(
        type[_Envelope],
        msgspec.defstruct(
            f"_Event_{kind}",
            [("data", data)],
            bases=(_Envelope,),
            tag=kind,
            namespace={"KIND": kind, "KIND_BYTES": kind.encode("ascii")},
            frozen=True,
            forbid_unknown_fields=True,
            gc=False,
        ),
    )


_EVENT_CLASSES: Final = tuple(_tagged(kind, cls) for kind, cls in DATA_CLASSES.items())
# One decode validates the envelope and the data in C; re-encoding sorted proves canonical form
# exactly as schemas.ledger.decode_event does (same constraints, same encoder settings).
_DECODER: Final[msgspec.json.Decoder[_Envelope]] = msgspec.json.Decoder(
    Union[_EVENT_CLASSES]  # noqa: UP007
)
_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def sound_audit(
    pid: str, entries: Sequence[Entry], indexed: Sequence[Entry], rules: AuditRules
) -> StreamAudit | None:
    """Return the verdict on a sound, fully indexed stream, or None to ask for the full audit."""
    count = len(entries)
    if not 0 < count <= MAX_ENTRIES or len(indexed) != count:
        return None
    if len(pid) != 32 or not set(pid) <= _PID_CHARS:
        return None
    try:
        return _sound(pid, entries, indexed, rules)
    except (ValueError, TypeError, IndexError):  # a malformed reply shape or non-ASCII text
        return None


def _sound(
    pid: str, entries: Sequence[Entry], indexed: Sequence[Entry], rules: AuditRules
) -> StreamAudit | None:
    key, skew_ms, grace_ms = rules.key, rules.skew_ms, rules.grace_ms
    sha256, encode, decode = hashlib.sha256, _ENCODER.encode, _DECODER.decode
    rules_from = _RULES
    prev = genesis(pid)
    last_srv = -1
    state: State = "NONE"
    prepared: Prepared | None = None
    claimed: Claimed | None = None
    claimed_srv: int | None = None
    terminal: EventData | None = None
    filing_srv: int | None = None
    last_type = ""
    late = False
    for position, (entry_id, fields) in enumerate(entries, start=1):
        listed = indexed[position - 1][1]
        width = len(fields)
        if entry_id != _IDS[position] or not (width == 10 or (width == 12 and fields[10] == b"m")):
            return None
        if fields[0] != b"e" or fields[2] != b"h" or fields[4] != b"t":
            return None
        if fields[6] != b"eid" or fields[8] != b"srv_ms" or len(listed) != 8:
            return None
        e, h, t = fields[1], fields[3], fields[5]
        if listed[2] != b"seq" or listed[3] != _SEQS[position] or listed[4] != b"t":
            return None
        if listed[5] != t or listed[6] != b"h" or listed[7] != h or not e.isascii():
            return None
        h_text = h.decode("ascii")
        if sha256(HASH_DOMAIN + e).hexdigest() != h_text:
            return None
        if key is not None and (
            width != 12 or not hmac.compare_digest(event_mac(key, h_text).encode(), fields[11])
        ):
            return None
        srv_text = fields[9]
        if not srv_text.isdigit():
            return None
        srv = int(srv_text)
        if srv < last_srv:
            return None
        last_srv = srv
        try:
            event = decode(e)
        except msgspec.DecodeError:
            return None
        kind = event.KIND
        data: EventData = event.data
        if encode(event) != e or event.seq != position or event.pid != pid:
            return None
        if event.prev != prev or event.eid.encode() != fields[7] or event.KIND_BYTES != t:
            return None
        if abs(event.at_ms - srv) > skew_ms:
            return None
        prev = h_text
        # The lifecycle fold of ledger.lifecycle.advance, and the rules of §8.13 items 8-9. The
        # rules read the fold's final claim, filing start and preparation; each can only be set
        # once and before the events the rules check, so checking them in order is the same.
        if kind in ANNOTATION_TYPES:
            if state == "NONE":
                return None
            late = late or kind == "late_outcome_observed"
            continue
        rule = rules_from.get(state, {}).get(kind)
        if rule is None or (kind == "prepared" and position != 1):
            return None
        if rule.when and not guards_hold(rule, data):
            return None
        need = rule.need
        if need:
            if need == "deadline" and prepared is not None and srv < prepared.expires_ms:
                return None
            if need == "append_sent" and (claimed is None or not claimed.append_sent):
                return None
            if need == "recovery" and not event.actor.startswith("recovery:"):
                return None
        if isinstance(data, Prepared):
            prepared = data
        elif isinstance(data, Claimed):
            if prepared is None or data.confirmed_digest != prepared.digest:
                return None
            if srv >= prepared.expires_ms:
                return None
            claimed, claimed_srv = data, srv
        elif kind in DISPATCH_TERMINAL_TYPES:
            if isinstance(data, RecoveryClassified) and (
                claimed_srv is None
                or srv - claimed_srv < grace_ms
                or data.last_lifecycle_type != last_type
                or CLOSED_FROM[data.classification] != last_type
            ):
                return None
            terminal = data
        elif kind == "sent_filing_started":
            filing_srv = srv
        elif (
            isinstance(data, SentFilingFailed)
            and event.actor.startswith("recovery:")
            and (filing_srv is None or srv - filing_srv < grace_ms)
        ):
            return None
        state = rule.to
        last_type = kind
    if prepared is None:
        return None
    as_of = rules.as_of_ms
    # public_status of ledger.projection, without the parts StreamAudit does not keep.
    if len(prepared.message_id) > MAX_MESSAGE_ID_BYTES:  # MessageId admits ASCII only
        return None
    if not 0 < prepared.expires_ms <= _MAX_EXPIRES_MS:
        return None
    if state == "PREPARED":
        status = "prepared" if as_of < prepared.expires_ms else "expired"
    elif state in _STATUS:
        status = _STATUS[state]
    else:
        return None
    stage = ""
    if status in ("accepted", "rejected", "unknown") and isinstance(terminal, _STAGED):
        stage = terminal.stage if terminal.stage in PUBLIC_STAGES else ""
    reason = investigate_reason(
        status,
        flagged=False,
        late=late,
        state=state,
        claimed_srv_ms=claimed_srv,
        filing_srv_ms=filing_srv,
        rules=rules,
    )
    return StreamAudit(
        pid=pid,
        events=len(entries),
        status=status,
        stage=stage,
        recovered=isinstance(terminal, RecoveryClassified),
        late_outcome=late,
        last_srv_ms=last_srv,
        investigate=reason,
    )
