"""The archive directory read back: every kind of damage to segments and checkpoints is named.

Archives here are written by the archiver's own SegmentWriter and signed with a fresh key; the
records are rules records (their content does not matter to these file-level checks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.archive import checkpoint as checkpoint_format
from ledger.archive import records
from ledger.archive.audit import consistent_from, read_archive
from ledger.archive.merkle import Frontier, leaf_hash
from ledger.archive.segments import ArchiveDamaged, SegmentWriter, lines_of, list_segments
from ledger.archive.signed_note import SignerKey, VerifierKey, generate_key, sign

SIGNER, VERIFIER = generate_key("unit-audit")


def rules(n: int) -> bytes:
    return records.encode(records.RulesRecord(
        n=n, namespace="unit", store_id="ab" * 16, retention_ms=1, recovery_grace_ms=1,
        archived_ms=n,
    ))  # fmt: skip


def build(root: Path, sizes: list[int], *, signer: SignerKey = SIGNER) -> list[bytes]:
    """Write segments of the given record counts, a checkpoint at each segment's end."""
    writer = SegmentWriter(root, 1 << 30)
    writer.open()
    frontier = Frontier()
    lines: list[bytes] = []
    for count in sizes:
        writer.start_segment(frontier.size)
        batch = [rules(frontier.size + i) for i in range(count)]
        writer.append(batch)
        writer.sync()
        for line in batch:
            frontier.append(leaf_hash(line))
        lines += batch
        body = checkpoint_format.render(
            checkpoint_format.Checkpoint("unit/log", frontier.size, frontier.root())
        )
        writer.write_checkpoint(frontier.size, sign(body, signer))
    writer.close()
    return lines


def kinds(root: Path, key: VerifierKey = VERIFIER) -> list[str]:
    return [finding.kind for finding in read_archive(root, key).problems]


def test_an_intact_archive_has_no_problem_and_every_checkpoint_verifies(tmp_path: Path) -> None:
    build(tmp_path, [3, 4, 2])
    found = read_archive(tmp_path, VERIFIER)
    assert [] == found.problems
    assert [3, 7, 9] == [cp.size for cp in found.checkpoints]
    assert 9 == len(found.leaves) == len(found.rules)


def test_a_removed_segment_is_out_of_sequence_and_cuts_the_signed_records(tmp_path: Path) -> None:
    build(tmp_path, [3, 4, 2])
    list_segments(tmp_path)[1].path.unlink()
    # One finding for the gap (not one per record after it); the checkpoints after the gap
    # signed records that are gone.
    assert ["archive_out_of_sequence", "archive_truncated", "archive_truncated"] == kinds(
        tmp_path
    )


def test_two_swapped_segments_are_named(tmp_path: Path) -> None:
    build(tmp_path, [3, 3, 3])
    first, second = (segment.path for segment in list_segments(tmp_path)[:2])
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    found = read_archive(tmp_path, VERIFIER)
    assert "archive_out_of_sequence" in [f.kind for f in found.problems]
    assert any(first.name in f.detail for f in found.problems)


def test_an_edited_record_breaks_the_root_of_every_checkpoint_after_it(tmp_path: Path) -> None:
    build(tmp_path, [3, 3])
    segment = list_segments(tmp_path)[1].path
    segment.write_bytes(segment.read_bytes().replace(b'"archived_ms":4', b'"archived_ms":5'))
    assert ["checkpoint_root_mismatch"] == kinds(tmp_path)


def test_a_torn_tail_and_a_bad_record_are_named(tmp_path: Path) -> None:
    build(tmp_path, [2])
    segment = list_segments(tmp_path)[0].path
    segment.write_bytes(segment.read_bytes() + b'not json\n{"r":"ru')
    assert ["archive_bad_record", "archive_truncated"] == sorted(kinds(tmp_path))


def test_a_checkpoint_of_another_key_or_of_another_size_is_named(tmp_path: Path) -> None:
    build(tmp_path, [2, 2])
    other, _ = generate_key("unit-audit")
    (tmp_path / "checkpoints" / f"{2:020d}.note").write_bytes(
        sign(checkpoint_format.render(
            checkpoint_format.Checkpoint("unit/log", 2, b"\0" * 32)), other)
    )  # fmt: skip
    assert ["checkpoint_not_signed"] == kinds(tmp_path)
    real = (tmp_path / "checkpoints" / f"{4:020d}.note").read_bytes()
    (tmp_path / "checkpoints" / f"{3:020d}.note").write_bytes(real)
    assert ["checkpoint_not_signed", "checkpoint_misnamed"] == kinds(tmp_path)


def test_records_without_any_checkpoint_are_named(tmp_path: Path) -> None:
    build(tmp_path, [2])
    for note in (tmp_path / "checkpoints").iterdir():
        note.unlink()
    assert ["checkpoint_missing"] == kinds(tmp_path)


def test_a_kept_checkpoint_proves_the_archive_only_grew_or_names_a_rollback(
    tmp_path: Path,
) -> None:
    old = tmp_path / "old"
    new = tmp_path / "new"
    build(old, [3])
    build(new, [3, 5])
    kept = read_archive(old, VERIFIER).checkpoints[-1]
    earlier = checkpoint_format.Checkpoint("unit/log", kept.size, kept.root)
    assert consistent_from(read_archive(new, VERIFIER), earlier) is None
    latest = read_archive(new, VERIFIER).checkpoints[-1]
    later = checkpoint_format.Checkpoint("unit/log", latest.size, latest.root)
    rolled = consistent_from(read_archive(old, VERIFIER), later)
    assert rolled is not None and "archive_rolled_back" == rolled.kind


def test_the_writer_cuts_a_torn_tail_and_refuses_a_gap(tmp_path: Path) -> None:
    lines = build(tmp_path, [2, 2])
    last = list_segments(tmp_path)[-1].path
    last.write_bytes(last.read_bytes() + b'{"r":"rul')
    writer = SegmentWriter(tmp_path, 1 << 30)
    tail = writer.open()
    writer.close()
    assert 9 == tail.torn_bytes
    assert lines[2:] == tail.last_lines
    assert last.read_bytes().endswith(b"\n")
    list_segments(tmp_path)[0].path.unlink()
    with pytest.raises(ArchiveDamaged, match="starts at leaf 2"):
        SegmentWriter(tmp_path, 1 << 30).open()


def test_a_second_writer_of_one_directory_is_refused(tmp_path: Path) -> None:
    first = SegmentWriter(tmp_path, 1 << 30)
    first.open()
    try:
        with pytest.raises(ArchiveDamaged, match="another archiver"):
            SegmentWriter(tmp_path, 1 << 30).open()
    finally:
        first.close()


def test_lines_of_splits_whole_lines_and_measures_the_torn_tail() -> None:
    assert ([b"a", b"b"], 0) == lines_of(b"a\nb\n")
    assert ([b"a"], 2) == lines_of(b"a\nbc")
    assert ([], 3) == lines_of(b"abc")


def test_every_record_kind_round_trips_its_exact_line() -> None:
    line = rules(7)
    assert line == records.encode(records.decode(line))
    missing = records.MissingRecord(n=1, ix="5-0", pid="cd" * 16, seq=2, t="claimed", h="0" * 64)
    assert missing == records.decode(records.encode(missing))

