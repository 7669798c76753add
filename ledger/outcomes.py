"""What the ledger store answers: heads, script outcomes, recovery candidates, settings."""

from __future__ import annotations

import os
from typing import Final, Literal

from msgspec import Struct

from ledger.lifecycle import State
from schemas.secret import Secret

DEFAULT_RETENTION_MS: Final = 604_800_000
DEFAULT_PREPARE_TTL_MS: Final = 900_000


# Ids drawn ahead from the CSPRNG, 128 per getrandom call: one call per id cost ~2 µs under
# load, 7 ids per send lifecycle (bench/ledger_core.py). A forked child starts with none, so
# it never repeats an id its parent will also hand out.
_DRAWN: list[str] = []
_DRAW_BYTES: Final = 2048
os.register_at_fork(after_in_child=_DRAWN.clear)


def new_id() -> str:
    """Return 32 lowercase hex from the CSPRNG (eids, claim tokens, dispatcher ids)."""
    try:
        return _DRAWN.pop()  # atomic under the GIL: no id goes to two callers
    except IndexError:
        text = os.urandom(_DRAW_BYTES).hex()
        _DRAWN.extend(text[start : start + 32] for start in range(32, len(text), 32))
        return text[:32]


class LedgerSettings(Struct, frozen=True, kw_only=True):
    """The ledger variables of §8.14 the store needs (the service maps its StoreConfig here)."""

    namespace: str = "angelos"
    retention_ms: int = DEFAULT_RETENTION_MS
    annotation_cap: int = 32
    recovery_grace_ms: int = 900_000
    prepare_ttl_ms: int = DEFAULT_PREPARE_TTL_MS
    hmac_key: Secret | None = None  # ANGELOS_LEDGER_HMAC_KEY, 64 hex
    write_attempts: int = 3  # tries of an idempotent (eid-carrying) write on a lost reply
    batching: bool = True  # coalesce script calls of one loop turn into pipelines (runner.py)


class Head(Struct, frozen=True):
    """The newest entry of a stream as a writer must name it: seq, hash, lifecycle state."""

    seq: int
    h: str
    state: State


class PrepareOutcome(Struct, frozen=True, kw_only=True):
    """`ok` (written now), `duplicate` (an earlier try with this eid landed) or `exists`."""

    result: Literal["ok", "duplicate", "exists"]
    eid: str
    head: Head | None = None  # the prepared entry when written (ok or duplicate)
    srv_ms: int = 0


ClaimResult = Literal[
    "claimed", "missing", "mismatch", "existing", "expired", "conflict", "payload_missing",
    "ack_lost",
]  # fmt: skip


class ClaimOutcome(Struct, frozen=True, kw_only=True):
    """The one-time claim's answer; only `claimed` carries the payload bytes.

    `ack_lost`: a claim with this eid had already landed (its reply was lost), so the
    payload is gone; the caller owns the claim and must abort the dispatch (§8.8 step 2).
    """

    result: ClaimResult
    payload: bytes = b""
    srv_ms: int = 0
    head: Head | None = None  # after `claimed` the claimed entry; else the current head if known


AppendResult = Literal[
    "appended", "duplicate", "conflict", "invalid_transition", "lease_alive", "too_early",
    "annotation_cap", "missing",
]  # fmt: skip


class AppendOutcome(Struct, frozen=True, kw_only=True):
    """A compare-and-append's answer; `head` is the stream head afterwards when known."""

    result: AppendResult
    eid: str
    seq: int = 0  # where the event landed (appended, duplicate)
    srv_ms: int = 0
    head: Head | None = None
    state: State | None = None  # the lifecycle state the script saw (conflict, refusals)


class OpenMember(Struct, frozen=True):
    """A claimed dispatch (`dispatch`) or started filing (`filing`) without its closing event."""

    kind: Literal["dispatch", "filing"]
    pid: str
    since_ms: int

    @property
    def member(self) -> str:
        """Return the ZSET member text (`d:<pid>` or `f:<pid>`)."""
        return f"{self.kind[0]}:{self.pid}"


class UnclaimedMember(Struct, frozen=True):
    """An unclaimed preparation and its deadline."""

    pid: str
    expires_ms: int


class LedgerMeta(Struct, frozen=True):
    """The namespace's meta hash."""

    schema: str
    created_ms: int
    mac_key_id: str
