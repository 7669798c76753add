"""What the ledger store answers, and how raw Redis replies become those answers untrusted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, cast

from msgspec import Struct

from ledger.lifecycle import STATES, State, rule_for
from schemas.ledger import EventRejected, LedgerCorrupt

ACKNOWLEDGE_COMMAND: Final = "angelos ledger acknowledge-rollback"


class Head(Struct, frozen=True):
    """The newest entry of a stream as a writer must name it: seq, hash, lifecycle state."""

    seq: int
    h: str
    state: State


class PrepareOutcome(Struct, frozen=True, kw_only=True):
    """`ok` (written now), `duplicate` (an earlier try with this eid landed), `exists`, or
    `halted` (a rollback halt is recorded: nothing may start)."""

    result: Literal["ok", "duplicate", "exists", "halted"]
    eid: str
    head: Head | None = None  # the prepared entry when written (ok or duplicate)
    srv_ms: int = 0


ClaimResult = Literal[
    "claimed", "missing", "mismatch", "existing", "expired", "conflict", "payload_missing",
    "ack_lost", "halted", "approval_required", "rate_limited",
]  # fmt: skip


class ClaimOutcome(Struct, frozen=True, kw_only=True):
    """The one-time claim's answer; only `claimed` carries the payload bytes.

    `ack_lost`: a claim with this eid had already landed (its reply was lost), so the
    payload is gone; the caller owns the claim and must abort the dispatch. `halted`: a
    rollback halt is recorded (or this claim found one): nothing was consumed.
    `approval_required`: the preparation requires an approval that is not recorded.
    `rate_limited`: the send rate limit is reached until `srv_ms`; nothing was consumed.
    """

    result: ClaimResult
    payload: bytes = b""
    srv_ms: int = 0
    head: Head | None = None  # after `claimed` the claimed entry; else the current head if known
    clock: int = 0  # the ledger clock after `claimed`
    confirmed: bool = True  # the required WAIT/WAITAOF confirmed it (durability/acks.py)


AppendResult = Literal[
    "appended", "duplicate", "conflict", "invalid_transition", "lease_alive", "too_early",
    "annotation_cap", "missing", "halted", "not_halted",
]  # fmt: skip


class AppendOutcome(Struct, frozen=True, kw_only=True):
    """A compare-and-append's answer; `head` is the stream head afterwards when known."""

    result: AppendResult
    eid: str
    seq: int = 0  # where the event landed (appended, duplicate)
    srv_ms: int = 0
    head: Head | None = None
    state: State | None = None  # the lifecycle state the script saw (conflict, refusals)
    clock: int = 0  # the ledger clock after an appended lifecycle event (0 for annotations)
    confirmed: bool = True  # the required WAIT/WAITAOF confirmed it (durability/acks.py)


class OpenMember(Struct, frozen=True):
    """A claimed dispatch (`dispatch`) or started filing (`filing`) without its closing event."""

    kind: Literal["dispatch", "filing"]
    pid: str
    since_ms: int

    @property
    def member(self) -> str:
        """Return the ZSET member text (`d:<pid>` or `f:<pid>`)."""
        return f"{self.kind[0]}:{self.pid}"


class LedgerMeta(Struct, frozen=True):
    """The namespace's meta hash."""

    schema: str
    created_ms: int
    mac_key_id: str
    store_id: str  # random, made at the ledger's first start: names this ledger's witness


class Halt(Struct, frozen=True):
    """A recorded rollback: when it was found, the store's clock and the witness's clock."""

    detected_ms: int
    store_clock: int
    witness_clock: int
    record: str  # the stored text, which an acknowledgement must name exactly

    @classmethod
    def parse(cls, record: str) -> Halt:
        """Read `meta.halt`; an unreadable record still halts (with zeros)."""
        parts = record.split(" ")
        numbers = [int(p) for p in parts if p.isdigit()]
        if len(parts) != 3 or len(numbers) != 3:
            return cls(0, 0, 0, record)
        return cls(numbers[0], numbers[1], numbers[2], record)

    @property
    def reason(self) -> str:
        """Say, for agents and operators, why sending is off."""
        when = datetime.fromtimestamp(self.detected_ms / 1000, tz=UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        return (
            f"the ledger store went back in time (acknowledged writes were lost; detected "
            f"{when}): sending stays off until a person runs `{ACKNOWLEDGE_COMMAND}`"
        )


def text(value: Any) -> str:
    """Decode a reply element; latin-1 maps stored bytes 1:1, so hashes stay verifiable."""
    return value.decode("latin-1") if isinstance(value, bytes | bytearray) else str(value)


def time_ms(reply: Any) -> int:
    """Turn a TIME reply (seconds, microseconds) into milliseconds."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def state_of(value: Any) -> State:
    """Validate a lifecycle state name reported by a script."""
    name = text(value)
    if name not in STATES:
        raise LedgerCorrupt("the ledger script reported an unknown state")
    return name


def head_from(values: Sequence[Any]) -> Head:
    """Build a Head from a script's (seq, h, state) triple."""
    return Head(int(values[0]), text(values[1]), state_of(values[2]))


def unexpected(reply: Any) -> Exception:
    """The error for a script answer outside its contract."""
    kind = text(reply[0]) if isinstance(reply, list) and reply else ""
    if kind == "malformed":
        return EventRejected("the ledger script refused the event as malformed")
    if kind == "corrupt":
        return LedgerCorrupt("the send ledger stream failed the script's integrity checks")
    return LedgerCorrupt("the ledger script gave an unexpected answer")


def claim_outcome(reply: Any, head: Head, h: str) -> ClaimOutcome:
    """Interpret the ledger_claim reply; `head`/`h` are what the caller sent."""
    result = text(reply[0])
    if result == "claimed":
        return ClaimOutcome(
            result="claimed",
            payload=bytes(reply[1]),
            srv_ms=int(reply[2]),
            head=Head(head.seq + 1, h, "CLAIMED"),
            clock=int(reply[3]),
        )
    if result in ("existing", "conflict", "ack_lost"):
        return ClaimOutcome(result=cast(ClaimResult, result), head=head_from(reply[1:4]))
    if result in ("expired", "rate_limited"):
        return ClaimOutcome(result=cast(ClaimResult, result), srv_ms=int(reply[1]))
    if result in ("missing", "mismatch", "payload_missing", "halted", "approval_required"):
        return ClaimOutcome(result=cast(ClaimResult, result))
    raise unexpected(reply)


def append_outcome(reply: Any, head: Head, event_type: str, h: str, eid: str) -> AppendOutcome:
    """Interpret the ledger_append reply; `head`/`h` are what the caller sent."""
    result = text(reply[0])
    if result == "appended":
        rule = rule_for(head.state, event_type)
        state = head.state if rule is None else rule.to
        seq = int(reply[1])
        return AppendOutcome(
            result="appended", eid=eid, seq=seq, srv_ms=int(reply[2]), head=Head(seq, h, state),
            clock=int(reply[3]),
        )  # fmt: skip
    if result == "duplicate":
        current = head_from(reply[2:5])
        return AppendOutcome(
            result="duplicate", eid=eid, seq=int(reply[1]), head=current, state=current.state
        )
    if result == "conflict":
        current = head_from(reply[1:4])
        return AppendOutcome(result="conflict", eid=eid, head=current, state=current.state)
    if result == "invalid_transition":
        return AppendOutcome(result="invalid_transition", eid=eid, state=state_of(reply[1]))
    if result == "too_early":
        return AppendOutcome(result="too_early", eid=eid, srv_ms=int(reply[1]))
    if result in ("lease_alive", "annotation_cap", "missing", "halted", "not_halted"):
        return AppendOutcome(result=cast(AppendResult, result), eid=eid)
    raise unexpected(reply)
