"""Verify an archive directory offline: segments, signed checkpoints, chains and statuses.

Nothing here needs Redis or any configuration: the archive's rules records say which ledger it
is and under which rules it ran, and the public key says who signed its checkpoints. Every
problem is a Finding that names the segment, leaf, checkpoint or send it is about.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
from msgspec import Struct, field

from ledger.archive import checkpoint as checkpoint_format
from ledger.archive import records
from ledger.archive.merkle import Tree, leaf_hash, verify_consistency
from ledger.archive.segments import ArchiveDamaged, list_checkpoints, read_records
from ledger.archive.signed_note import NoteError, VerifierKey, open_note
from ledger.audit.checks import AuditRules, Finding, audit_stream
from ledger.audit.summary import LedgerAudit
from schemas.ledger import LedgerEntry


class SignedCheckpoint(Struct, frozen=True):
    """A checkpoint whose signature verified: its tree size, root and file."""

    size: int
    root: bytes
    origin: str
    file: str


class ArchiveRead(Struct, kw_only=True):
    """An archive read back: events per send, what it lacked, its tree and its checkpoints."""

    entries: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    ixs: dict[str, records.EventRecord | records.MissingRecord] = field(default_factory=dict)
    missing: list[records.MissingRecord] = field(default_factory=list)
    rules: list[records.RulesRecord] = field(default_factory=list)
    leaves: list[bytes] = field(default_factory=list)
    segments: int = 0
    checkpoints: list[SignedCheckpoint] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    shift: int = 0  # record numbers minus positions since the last discontinuity reported


def read_archive(root: Path, key: VerifierKey) -> ArchiveRead:
    """Read every segment and checkpoint, checking sequence, tree and signatures."""
    # A million acyclic records would set off full collections that find nothing to free:
    # without them reading takes ~5 s instead of ~7 s (bench/audit.py's archive).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_archive(root, key)
    finally:
        if collecting:
            gc.enable()


def _read_archive(root: Path, key: VerifierKey) -> ArchiveRead:
    found = ArchiveRead()
    try:
        segments = list(read_records(root))
    except (ArchiveDamaged, OSError) as exc:
        found.problems.append(Finding("", 0, "archive_unreadable", str(exc)))
        return found
    if not segments:
        found.problems.append(Finding("", 0, "archive_empty", f"{root} holds no segment"))
    for number, (segment, lines, torn) in enumerate(segments):
        found.segments += 1
        name = segment.path.name
        if segment.first != len(found.leaves):
            found.problems.append(Finding(
                "", 0, "archive_out_of_sequence",
                f"segment {name} should start at record {len(found.leaves)}; its name says "
                f"{segment.first}: a segment was removed, swapped or renamed",
            ))  # fmt: skip
        found.shift = segment.first - len(found.leaves)
        if torn:
            last = number == len(segments) - 1
            found.problems.append(Finding(
                "", 0, "archive_truncated",
                f"segment {name} ends inside a record ({torn} bytes)"
                + (": the archiver stopped mid-write, or the file was cut" if last else ""),
            ))  # fmt: skip
        for line in lines:
            _take(found, name, line)
    _check_checkpoints(found, root, key)
    return found


def _take(found: ArchiveRead, segment: str, line: bytes) -> None:
    n = len(found.leaves)
    found.leaves.append(leaf_hash(line))
    try:
        record = records.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        found.problems.append(
            Finding("", 0, "archive_bad_record", f"record {n} in {segment} is not readable")
        )
        return
    if record.n - n != found.shift:  # one finding per discontinuity, not one per record
        found.shift = record.n - n
        found.problems.append(Finding(
            "", 0, "archive_out_of_sequence",
            f"{segment} holds record {record.n} where record {n} belongs: records were "
            "removed, repeated or reordered",
        ))  # fmt: skip
    if isinstance(record, records.RulesRecord):
        found.rules.append(record)
    elif isinstance(record, records.MissingRecord):
        found.missing.append(record)
        found.ixs[record.ix] = record
    else:
        found.entries.setdefault(record.pid, []).append(record)
        found.ixs[record.ix] = record


def _check_checkpoints(found: ArchiveRead, root: Path, key: VerifierKey) -> None:
    """Each checkpoint: signed by the key, for this ledger, over a prefix of these records."""
    wanted: dict[int, list[tuple[str, checkpoint_format.Checkpoint]]] = {}
    origins: set[str] = set()
    for size, path in list_checkpoints(root):
        try:
            body = open_note(path.read_bytes(), key)
            parsed = checkpoint_format.parse(body)
        except (NoteError, ValueError, OSError) as exc:
            found.problems.append(Finding(
                "", 0, "checkpoint_not_signed",
                f"checkpoint {path.name} does not verify under key {key.name}: {exc}",
            ))  # fmt: skip
            continue
        if parsed.size != size:
            found.problems.append(Finding(
                "", 0, "checkpoint_misnamed",
                f"checkpoint {path.name} is for tree size {parsed.size}",
            ))  # fmt: skip
        origins.add(parsed.origin)
        wanted.setdefault(parsed.size, []).append((path.name, parsed))
    if not wanted and found.leaves:
        found.problems.append(Finding("", 0, "checkpoint_missing",
                                      "no signed checkpoint covers any record"))
    if len(origins) > 1:
        found.problems.append(Finding(
            "", 0, "checkpoint_origin_mixed", f"checkpoints name {len(origins)} different logs",
        ))  # fmt: skip
    tree = Tree(found.leaves)
    previous: SignedCheckpoint | None = None
    for size in [size for size in sorted(wanted) if size <= len(found.leaves)]:
        for name, parsed in wanted[size]:
            if parsed.root != tree.root(size):
                found.problems.append(Finding(
                    "", 0, "checkpoint_root_mismatch",
                    f"checkpoint {name} signed a tree of {size} records the archive no "
                    "longer holds: a record before it was changed, removed or reordered",
                ))  # fmt: skip
                continue
            signed = SignedCheckpoint(parsed.size, parsed.root, parsed.origin, name)
            # The proof a party holding only the two checkpoints would check: the tree grew.
            proof = [] if previous is None else tree.consistency_proof(previous.size, size)
            if previous is not None and not verify_consistency(
                previous.size, size, previous.root, signed.root, proof
            ):
                found.problems.append(Finding(
                    "", 0, "checkpoint_inconsistent",
                    f"checkpoint {name} does not extend {previous.file}",
                ))  # fmt: skip
            found.checkpoints.append(signed)
            previous = signed
    for size in sorted(wanted):
        if size > len(found.leaves):
            found.problems.append(Finding(
                "", 0, "archive_truncated",
                f"checkpoint {size:020d}.note signed {size} records; the archive holds "
                f"{len(found.leaves)}: records were cut off",
            ))  # fmt: skip


def consistent_from(found: ArchiveRead, earlier: checkpoint_format.Checkpoint) -> Finding | None:
    """Prove the archive's latest checkpoint extends one the auditor kept; None when it does."""
    if not found.checkpoints:
        return Finding("", 0, "checkpoint_missing", "no signed checkpoint to compare with")
    latest = found.checkpoints[-1]
    ok = earlier.size <= latest.size and verify_consistency(
        earlier.size, latest.size, earlier.root, latest.root,
        Tree(found.leaves).consistency_proof(earlier.size, latest.size),
    )  # fmt: skip
    if ok:
        return None
    return Finding(
        "", 0, "archive_rolled_back",
        f"the checkpoint kept from before (size {earlier.size}) is not a prefix of this archive "
        f"(latest size {latest.size}): the archive was rolled back or rewritten",
    )


def audit_archive(
    found: ArchiveRead, rules: AuditRules, *, keep_steps: bool = False
) -> LedgerAudit:
    """Check every archived send's chain, state machine and rules; fold the verdicts."""
    started = time.perf_counter()
    summary = LedgerAudit(keep_steps=keep_steps)
    summary.findings += found.problems
    summary.index_entries = len(found.ixs)
    for pid, entries in found.entries.items():
        summary.add(audit_stream(pid, entries, rules), entries)
    for line in found.missing:
        summary.findings.append(Finding(
            line.pid, line.seq, "missing_stream",
            "indexed event was already gone from the store when the archiver reached it",
        ))  # fmt: skip
    summary.elapsed_s = time.perf_counter() - started
    return summary


def archive_rules(
    found: ArchiveRead, key: bytes | None, as_of_ms: int, skew_ms: int
) -> AuditRules:
    """The rules the archive recorded (its latest rules record), for sends that lack their own."""
    latest = found.rules[-1] if found.rules else None
    if latest is None:
        return AuditRules(key=key, skew_ms=skew_ms, as_of_ms=as_of_ms)
    return AuditRules(
        key=key, skew_ms=skew_ms, as_of_ms=as_of_ms,
        grace_ms=latest.recovery_grace_ms, grace_source="ledger",
        retention_ms=latest.retention_ms, retention_source="ledger",
    )  # fmt: skip


def sealed_key_ids(found: ArchiveRead) -> Sequence[str]:
    """The HMAC key IDs the ledger was sealed under, as its rules records say."""
    return sorted({rules.mac_key_id for rules in found.rules if rules.mac_key_id})
