"""The archive's records: one JSON line each, and each line one leaf of the Merkle tree.

A record is an archived ledger entry (`event`), an index entry whose stream entry was already
gone when the archiver came to it (`missing`), or the ledger's identity and rules as the
archiver found them (`rules`, first in every segment), so an auditor needs no configuration.
`n` is the record's leaf index: a gap, a repeat or a swap shows in it at once.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Struct, UnsetType

from schemas.ledger import LedgerEntry

ARCHIVE_FORMAT: Final = 1


class EventRecord(LedgerEntry, frozen=True, kw_only=True, tag="event", tag_field="r",
                  omit_defaults=True):
    """One ledger entry exactly as stored (it is a LedgerEntry), with its place in the archive.

    Being the entry itself, a decoded record goes to the audit without a copy.
    """

    n: int
    ix: str  # the index entry's ID: the append order across every send
    index_h: str | UnsetType = UNSET  # only when the index named another hash than the entry's


class MissingRecord(Struct, frozen=True, kw_only=True, tag="missing", tag_field="r"):
    """An index entry whose stream entry Redis no longer held when it was archived."""

    n: int
    ix: str
    pid: str
    seq: int
    t: str
    h: str


class RulesRecord(Struct, frozen=True, kw_only=True, tag="rules", tag_field="r"):
    """Which ledger this is and the rules it ran under, as the archiver read them."""

    n: int
    format: int = ARCHIVE_FORMAT
    namespace: str
    store_id: str
    mac_key_id: str = ""
    retention_ms: int
    recovery_grace_ms: int
    archived_ms: int


Record = EventRecord | MissingRecord | RulesRecord

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Record)


def encode(record: Record) -> bytes:
    """Return the record's line (without its newline): the exact bytes its leaf hashes."""
    return _ENCODER.encode(record)


def decode(line: bytes) -> Record:
    """Read one line back; raises msgspec.DecodeError / ValidationError when it does not fit."""
    return _DECODER.decode(line)


def event_record(n: int, ix: str, entry: LedgerEntry, index_h: str) -> EventRecord:
    """Archive one stored entry at leaf `n` under index entry `ix`."""
    return EventRecord(
        pid=entry.pid, id=entry.id, e=entry.e, h=entry.h, t=entry.t, eid=entry.eid,
        srv_ms=entry.srv_ms, m=entry.m, n=n, ix=ix,
        index_h=UNSET if index_h == entry.h else index_h,
    )
