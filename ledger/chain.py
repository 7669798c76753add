"""The per-send hash chain: genesis, event hash, optional MAC, checks."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

from msgspec import Struct, UnsetType

from schemas.ledger import Event, EventRejected, LedgerCorrupt, LedgerEntry, decode_event
from schemas.ledger_events import MAX_ENTRIES
from schemas.secret import Secret

GENESIS_DOMAIN: Final = b"angelos/send-ledger/v1/genesis\n"
HASH_DOMAIN: Final = b"angelos/send-ledger/v1\n"
MAC_DOMAIN: Final = b"angelos/send-ledger/v1/mac\n"
DEFAULT_SKEW_MS: Final = 300_000


def genesis(pid: str) -> str:
    """Return the `prev` of a stream's first event."""
    return hashlib.sha256(GENESIS_DOMAIN + pid.encode("ascii")).hexdigest()


def event_hash(e: bytes) -> str:
    """Return `h` for the exact canonical event bytes."""
    return hashlib.sha256(HASH_DOMAIN + e).hexdigest()


def mac_key(hex_key: str) -> bytes:
    """Turn ANGELOS_LEDGER_HMAC_KEY (64 hex) into the 32 key bytes K."""
    key = bytes.fromhex(hex_key)
    if len(key) != 32:
        raise ValueError("the ledger HMAC key must be 64 hex characters")
    return key


def key_of(secret: Secret | None) -> bytes | None:
    """Turn the configured ANGELOS_LEDGER_HMAC_KEY (or its absence) into K (or None)."""
    return None if secret is None else mac_key(secret.reveal())


def event_mac(key: bytes, h: str) -> str:
    """Return `m` = HMAC-SHA-256(K, domain || h)."""
    return hmac.new(key, MAC_DOMAIN + h.encode("ascii"), hashlib.sha256).hexdigest()


def mac_key_id(key: bytes) -> str:
    """Return the first 16 hex of SHA-256(K), recorded in the meta hash."""
    return hashlib.sha256(key).hexdigest()[:16]


class ChainProblem(Struct, frozen=True):
    """One integrity finding about one entry (seq 0 when the entry ID itself is malformed)."""

    seq: int
    kind: str  # id_gap | not_canonical | hash_mismatch | field_mismatch | prev_mismatch | ...
    detail: str


def chain_problems(
    pid: str,
    entries: Sequence[LedgerEntry],
    *,
    key: bytes | None = None,
    skew_ms: int | None = DEFAULT_SKEW_MS,
) -> list[ChainProblem]:
    """List every chain finding of one stream: IDs, canonical form, hashes, links, MACs, times."""
    return _walk(pid, entries, key, skew_ms)[0]


def _walk(
    pid: str, entries: Sequence[LedgerEntry], key: bytes | None, skew_ms: int | None
) -> tuple[list[ChainProblem], list[Event]]:
    problems: list[ChainProblem] = []
    events: list[Event] = []
    if len(entries) > MAX_ENTRIES:
        problems.append(ChainProblem(0, "too_long", f"more than {MAX_ENTRIES} entries"))
    prev = genesis(pid)
    last_srv = -1
    for position, entry in enumerate(entries, start=1):
        seq = entry.seq
        if seq != position:
            problems.append(ChainProblem(seq, "id_gap", f"entry {position} has a gap before it"))
        if entry.pid != pid:
            problems.append(ChainProblem(seq, "field_mismatch", "entry read for another pid"))
        raw = entry.e.encode("latin-1", "replace")  # read() maps stored bytes 1:1 to latin-1
        if event_hash(raw) != entry.h:
            problems.append(ChainProblem(seq, "hash_mismatch", "h is not the hash of e"))
        if key is not None:
            if isinstance(entry.m, UnsetType):
                problems.append(ChainProblem(seq, "mac_missing", "the entry carries no m"))
            elif not hmac.compare_digest(event_mac(key, entry.h), entry.m):
                problems.append(ChainProblem(seq, "mac_mismatch", "m does not verify"))
        if entry.srv_ms < last_srv:
            problems.append(ChainProblem(seq, "time_reversed", "srv_ms decreased"))
        last_srv = max(last_srv, entry.srv_ms)
        try:
            event = decode_event(entry.e)
        except EventRejected as exc:
            problems.append(ChainProblem(seq, "not_canonical", exc.message))
            prev = entry.h
            continue
        problems.extend(_field_problems(pid, seq, entry, event, prev, skew_ms))
        events.append(event)
        prev = entry.h
    return problems, events


def _field_problems(
    pid: str, seq: int, entry: LedgerEntry, event: Event, prev: str, skew_ms: int | None
) -> list[ChainProblem]:
    found: list[ChainProblem] = []
    if event.seq != seq:
        found.append(ChainProblem(seq, "field_mismatch", "seq in e differs from the entry ID"))
    if event.pid != pid:
        found.append(ChainProblem(seq, "field_mismatch", "pid in e differs from the stream"))
    if event.type != entry.t or event.eid != entry.eid:
        found.append(ChainProblem(seq, "field_mismatch", "t or eid differs from e"))
    if event.prev != prev:
        what = "genesis" if seq == 1 else "the previous h"
        found.append(ChainProblem(seq, "prev_mismatch", f"prev is not {what}"))
    if skew_ms is not None and abs(event.at_ms - entry.srv_ms) > skew_ms:
        found.append(ChainProblem(seq, "clock_skew", "at_ms is too far from srv_ms"))
    return found


def verified_events(
    pid: str, entries: Sequence[LedgerEntry], *, key: bytes | None = None
) -> list[Event]:
    """Decode a stream whose chain verifies; raise LedgerCorrupt on the first finding."""
    problems, events = _walk(pid, entries, key, None)
    if problems:
        first = problems[0]
        raise LedgerCorrupt(f"ledger chain check failed at seq {first.seq}: {first.kind}")
    return events
