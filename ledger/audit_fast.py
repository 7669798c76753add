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
from typing import Any, Final, NamedTuple

import msgspec

from ledger.audit import CLOSED_FROM, AuditRules, StreamAudit, investigate_reason
from ledger.audit_events import DECODER, ENCODER, valid_text
from ledger.chain import HASH_DOMAIN, event_mac, genesis
from ledger.lifecycle import STATES, TRANSITIONS, Rule, guards_hold
from schemas.ledger import PUBLIC_STAGES
from schemas.ledger_events import (
    ANNOTATION_TYPES,
    DISPATCH_TERMINAL_TYPES,
    MAX_ENTRIES,
    MAX_MESSAGE_ID_BYTES,
    Claimed,
    DispatchAborted,
    EventData,
    Prepared,
    RecoveryClassified,
    SmtpAccepted,
    SmtpOutcomeUnknown,
    SmtpRejected,
)

# A stream entry as hiredis parses XRANGE/XREAD: [id, [name, value, name, value, ...]], all bytes;
# an index entry likewise, with the fields pid, seq, t, h.
Entry = Sequence[Any]

# What the pass compares each entry's ID and field names with, by position.
_HEADS: Final = tuple((b"0-%d" % n, b"e", b"h", b"t", b"eid", b"srv_ms") for n in range(129))
SEQS: Final = tuple(b"%d" % n for n in range(MAX_ENTRIES + 1))
_PID_CHARS: Final = frozenset("0123456789abcdef")
# What a step of the fold must do beyond moving the state (see _sound).
_PREPARED, _CLAIMED, _TERMINAL, _FILING_STARTED, _FILING_FAILED, _LATE = range(1, 7)


class _Step(NamedTuple):
    """One allowed (state, event type) of ledger.lifecycle, compiled for the fast pass."""

    to: str  # "" for an annotation: the state stays
    guarded: Rule | None  # the rule whose data guards must hold, when it has any
    need: str
    action: int


def _compile_steps() -> dict[str, dict[str, _Step]]:
    actions = {
        "prepared": _PREPARED,
        "claimed": _CLAIMED,
        "sent_filing_started": _FILING_STARTED,
        "sent_filing_failed": _FILING_FAILED,
        **dict.fromkeys(DISPATCH_TERMINAL_TYPES, _TERMINAL),
    }
    steps: dict[str, dict[str, _Step]] = {state: {} for state in STATES}
    for (source, kind), rule in TRANSITIONS.items():
        guarded = rule if rule.when else None
        steps[source][kind] = _Step(rule.to, guarded, rule.need, actions.get(kind, 0))
    for source in STATES:
        if source != "NONE":  # an annotation needs a prepared stream, then never moves the state
            for kind in ANNOTATION_TYPES:
                late = _LATE if kind == "late_outcome_observed" else 0
                steps[source][kind] = _Step("", None, "", late)
    return steps


_STEPS: Final = _compile_steps()
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


def sound_audit(
    pid: str, entries: Sequence[Entry], rules: AuditRules
) -> tuple[StreamAudit, bytes] | None:
    """Judge a sound stream: (its verdict, the index text it needs), or None when unusual.

    The verdict holds only if the pid's index entries, joined by `index_text`, give the
    returned bytes; otherwise the caller runs the full audit.
    """
    if not 0 < len(entries) <= MAX_ENTRIES or len(pid) != 32 or not set(pid) <= _PID_CHARS:
        return None
    try:
        return _sound(pid, entries, rules)
    except (ValueError, TypeError, IndexError):  # a malformed reply shape or non-ASCII text
        return None


def index_text(indexed: Sequence[Entry]) -> bytes | None:
    """Join a pid's index entries as sound_audit joins the ones it expects: their count, then
    each entry's type and hash (LF between all); None unless every entry is exactly
    `pid <pid> seq <n> t <type> h <hash>` with n = 1, 2, ... in order.

    sound_audit's types and hashes hold no LF, so with the count fixed, equal texts mean
    equal entries, field by field (a stored value cannot hide a separator).
    """
    parts: list[bytes] = []
    for position, (_, fields) in enumerate(indexed, start=1):
        if position > MAX_ENTRIES or not plain_index(fields) or fields[3] != SEQS[position]:
            return None
        parts.append(fields[5])
        parts.append(fields[7])
    return b"%d\n" % len(indexed) + b"\n".join(parts)


def plain_index(fields: Sequence[bytes]) -> bool:
    """Tell whether an index entry's fields are pid, seq, t, h in the store's order."""
    return (
        len(fields) == 8
        and fields[0] == b"pid"
        and fields[2] == b"seq"
        and fields[4] == b"t"
        and fields[6] == b"h"
    )


def _sound(
    pid: str, entries: Sequence[Entry], rules: AuditRules
) -> tuple[StreamAudit, bytes] | None:
    key, skew_ms, grace_ms = rules.key, rules.skew_ms, rules.grace_ms
    sha256, encode, decode = hashlib.sha256, ENCODER.encode, DECODER.decode
    heads, steps = _HEADS, _STEPS
    # The type and hash of each index entry a correct writer leaves, for index_text's form.
    expected: list[bytes] = []
    prev = genesis(pid)
    last_srv = -1
    state = "NONE"
    prepared: Prepared | None = None
    claimed: Claimed | None = None
    claimed_srv: int | None = None
    terminal: EventData | None = None
    filing_srv: int | None = None
    last_type = ""
    late = False
    for position, (entry_id, fields) in enumerate(entries, start=1):
        # Unpacking raises ValueError (caught by sound_audit) for any other number of fields.
        if len(fields) == 10:
            e_name, e, h_name, h, t_name, t, eid_name, eid, srv_name, srv_text = fields
            if key is not None:
                return None
        else:
            e_name, e, h_name, h, t_name, t, eid_name, eid, srv_name, srv_text, m_name, m = fields
            if m_name != b"m":
                return None
        if (entry_id, e_name, h_name, t_name, eid_name, srv_name) != heads[position]:
            return None
        if not e.isascii() or not srv_text.isdigit():
            return None
        expected.append(t)
        expected.append(h)
        h_text = h.decode("ascii")
        if sha256(HASH_DOMAIN + e).hexdigest() != h_text:
            return None
        if key is not None and not hmac.compare_digest(event_mac(key, h_text).encode(), m):
            return None
        srv = int(srv_text)
        if srv < last_srv:
            return None
        last_srv = srv
        try:
            event = decode(e)
        except msgspec.DecodeError:
            return None
        if (
            encode(event) != e
            or event.seq != position
            or event.pid != pid
            or event.prev != prev
            or event.KIND_BYTES != t
            or event.eid.encode() != eid
            or abs(event.at_ms - srv) > skew_ms
            or not valid_text(event)
        ):
            return None
        prev = h_text
        # The lifecycle fold of ledger.lifecycle.advance, and the rules of §8.13 items 8-9. The
        # rules read the fold's final claim, filing start and preparation; each can only be set
        # once and before the events the rules check, so checking them in order is the same.
        step = steps[state].get(event.KIND)
        if step is None:
            return None
        to, guarded, need, action = step
        data: EventData = event.data
        if guarded is not None and not guards_hold(guarded, data):
            return None
        if need:
            if need == "deadline" and prepared is not None and srv < prepared.expires_ms:
                return None
            if need == "append_sent" and (claimed is None or not claimed.append_sent):
                return None
            if need == "recovery" and not event.actor.startswith("recovery:"):
                return None
        if action:
            if action == _PREPARED:
                if position != 1 or not isinstance(data, Prepared):
                    return None
                prepared = data
            elif action == _CLAIMED:
                if not isinstance(data, Claimed) or prepared is None:
                    return None
                if data.confirmed_digest != prepared.digest or srv >= prepared.expires_ms:
                    return None
                claimed, claimed_srv = data, srv
            elif action == _TERMINAL:
                if isinstance(data, RecoveryClassified) and (
                    claimed_srv is None
                    or srv - claimed_srv < grace_ms
                    or data.last_lifecycle_type != last_type
                    or CLOSED_FROM[data.classification] != last_type
                ):
                    return None
                terminal = data
            elif action == _FILING_STARTED:
                filing_srv = srv
            elif action == _FILING_FAILED:
                if event.actor.startswith("recovery:") and (
                    filing_srv is None or srv - filing_srv < grace_ms
                ):
                    return None
            else:  # _LATE
                late = True
        if to:
            state = to
            last_type = event.KIND
    if prepared is None:
        return None
    verdict = _verdict(
        pid, len(entries), last_srv, late, state, prepared, terminal, claimed_srv, filing_srv, rules
    )
    return None if verdict is None else (verdict, b"%d\n" % len(entries) + b"\n".join(expected))


def _verdict(
    pid: str,
    events: int,
    last_srv: int,
    late: bool,
    state: str,
    prepared: Prepared,
    terminal: EventData | None,
    claimed_srv: int | None,
    filing_srv: int | None,
    rules: AuditRules,
) -> StreamAudit | None:
    """public_status of ledger.projection, without the parts StreamAudit does not keep."""
    if len(prepared.message_id) > MAX_MESSAGE_ID_BYTES:  # MessageId admits ASCII only
        return None
    if not 0 < prepared.expires_ms <= _MAX_EXPIRES_MS:
        return None
    if state == "PREPARED":
        status = "prepared" if rules.as_of_ms < prepared.expires_ms else "expired"
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
        events=events,
        status=status,
        stage=stage,
        recovered=isinstance(terminal, RecoveryClassified),
        late_outcome=late,
        last_srv_ms=last_srv,
        investigate=reason,
    )
