"""The rollback witness file: the highest clock seen on this host, shared by its processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ledger.store.durability.witness import DIRECTORY, Witness, WitnessError

STORE_ID = "5e" * 16


def witness_in(tmp_path: Path) -> Witness:
    return Witness.open(str(tmp_path), "ns-1", STORE_ID)


class TestTheWitnessFile:
    async def test_a_kept_clock_survives_the_process(self, tmp_path: Path) -> None:
        first = witness_in(tmp_path)
        await first.keep(41)
        first.close()
        assert 41 == witness_in(tmp_path).floor()

    async def test_a_noted_clock_counts_at_once_but_reaches_the_disk_with_the_next_keep(
        self, tmp_path: Path
    ) -> None:
        witness = witness_in(tmp_path)
        witness.saw(90)
        assert (90, 0) == (witness.floor(), witness_in(tmp_path).floor())
        await witness.keep(10)
        assert 90 == witness_in(tmp_path).floor()

    async def test_the_file_keeps_the_larger_value_of_two_processes(self, tmp_path: Path) -> None:
        one, two = witness_in(tmp_path), witness_in(tmp_path)
        await one.keep(70)
        await two.keep(30)
        assert (70, 70) == (one.floor(), witness_in(tmp_path).floor())
        assert 70 == two.floor()  # it reads what the other process kept

    async def test_concurrent_keeps_share_one_write(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        witness = witness_in(tmp_path)
        writes: list[int] = []
        original = witness._write

        def counted(clock: int) -> int:
            writes.append(clock)
            return original(clock)

        monkeypatch.setattr(witness, "_write", counted)
        for clock in range(1, 51):
            witness.saw(clock)
        await asyncio.gather(*(witness.keep(clock) for clock in range(1, 51)))
        assert [50] == writes

    async def test_a_torn_or_foreign_record_is_not_believed(self, tmp_path: Path) -> None:
        witness = witness_in(tmp_path)
        await witness.keep(12)
        path = tmp_path / DIRECTORY / f"ns-1-{STORE_ID}"
        path.write_bytes(path.read_bytes().replace(b"12", b"99"))  # checksum no longer fits
        assert 0 == witness_in(tmp_path).floor()
        assert 12 == witness.floor()  # the process still knows what it saw

    def test_an_unwritable_data_directory_fails_closed(self, tmp_path: Path) -> None:
        blocked = tmp_path / "file"
        blocked.write_text("not a directory")
        with pytest.raises(WitnessError):
            Witness.open(str(blocked), "ns-1", STORE_ID)
        with pytest.raises(WitnessError):
            Witness.open("", "ns-1", STORE_ID)

    def test_the_file_is_private_to_the_user(self, tmp_path: Path) -> None:
        witness_in(tmp_path)
        path = tmp_path / DIRECTORY / f"ns-1-{STORE_ID}"
        assert (0o600, 0o700) == (
            os.stat(path).st_mode & 0o777,
            os.stat(path.parent).st_mode & 0o777,
        )

    def test_a_host_without_a_witness_opens_none_read_only(self, tmp_path: Path) -> None:
        assert Witness.existing(str(tmp_path), "ns-1", STORE_ID) is None
        witness_in(tmp_path)
        assert Witness.existing(str(tmp_path), "ns-1", STORE_ID) is not None
