"""The closer's journal: what a process owed survives it, and a live process keeps its own."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.dispatch.closer import CloseIntent
from ledger.dispatch.journal import Journal
from support.ledger import ACCEPTED, LATE

LEDGER = "ns-1-" + "5e" * 16


def owed(n: int) -> CloseIntent:
    return CloseIntent(
        pid=f"{n:032x}", eid=f"{n + 100:032x}", actor="dispatcher:" + "c3" * 16,
        events=(ACCEPTED,), late=LATE,
    )  # fmt: skip


class TestTheJournal:
    async def test_a_dead_process_owes_what_it_added_and_did_not_finish(
        self, tmp_path: Path
    ) -> None:
        gone = Journal.open(str(tmp_path), LEDGER, "a1" * 16)
        for n in (1, 2, 3):
            await gone.add(owed(n))
        await gone.done(owed(2))
        os.close(gone._fd)  # the process died: its lock is released, its file stays
        heir = Journal.open(str(tmp_path), LEDGER, "b2" * 16)
        assert [owed(1), owed(3)] == sorted(await heir.adopt(), key=lambda i: i.pid)
        assert [f"{'b2' * 16}.jsonl"] == os.listdir(heir.directory)

    async def test_the_journal_of_a_live_process_is_left_alone(self, tmp_path: Path) -> None:
        alive = Journal.open(str(tmp_path), LEDGER, "a1" * 16)
        await alive.add(owed(1))
        other = Journal.open(str(tmp_path), LEDGER, "b2" * 16)
        assert [] == await other.adopt()
        assert 2 == len(os.listdir(other.directory))

    async def test_an_adopted_intent_is_kept_by_the_heir_until_done(self, tmp_path: Path) -> None:
        gone = Journal.open(str(tmp_path), LEDGER, "a1" * 16)
        await gone.add(owed(1))
        os.close(gone._fd)
        heir = Journal.open(str(tmp_path), LEDGER, "b2" * 16)
        await heir.adopt()
        os.close(heir._fd)  # the heir dies too before the store answered
        third = Journal.open(str(tmp_path), LEDGER, "c3" * 16)
        assert [owed(1)] == await third.adopt()

    async def test_a_clean_close_with_nothing_owed_leaves_no_file(self, tmp_path: Path) -> None:
        journal = Journal.open(str(tmp_path), LEDGER, "a1" * 16)
        await journal.add(owed(1))
        await journal.done(owed(1))
        journal.close()
        assert [] == os.listdir(tmp_path / "ledger-journal" / LEDGER)

    async def test_an_unreadable_line_is_skipped_not_fatal(self, tmp_path: Path) -> None:
        gone = Journal.open(str(tmp_path), LEDGER, "a1" * 16)
        await gone.add(owed(1))
        os.write(gone._fd, b"{not json\n")
        await gone.add(owed(2))
        os.close(gone._fd)
        heir = Journal.open(str(tmp_path), LEDGER, "b2" * 16)
        assert 2 == len(await heir.adopt())
