"""The bounded raw read: exact bytes, flags, metadata, never \\Seen, stale and missing refs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from providers.imap.fetch import fetch_raw
from providers.imap.mailbox import ImapMailbox
from providers.mailbox import RAW_PREFIX
from schemas import errors
from schemas.mailbox import Reference
from service.app import imap_settings
from service.config import load_config
from support.imap import Append, append_messages, close_session, create_folder, open_session

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mail"


@pytest.fixture
async def mailbox(services: Any) -> AsyncIterator[ImapMailbox]:
    config = load_config(services.product_env)
    assert config.mail is not None
    box = ImapMailbox(imap_settings(config.mail))
    yield box
    await box.aclose()


@pytest.fixture
async def seeded(services: Any) -> Any:
    imap = await open_session(services)
    try:
        folder = await create_folder(imap, "fetch")
        messages = [
            Append((CORPUS / "01-plain-welcome.eml").read_bytes()),
            Append((CORPUS / "17-attachment-over-2mib.eml").read_bytes(), flags=("\\Flagged",)),
            Append((CORPUS / "18-attachment-over-5mib-total.eml").read_bytes()),
        ]
        result = await append_messages(imap, folder, messages)
        return result, [m.message for m in messages]
    finally:
        await close_session(imap)


def ref(result: Any, index: int) -> Reference:
    return Reference(folder=result.folder, uid_validity=result.uidvalidity, uid=result.uids[index])


class TestFetchRaw:
    async def test_bytes_and_metadata_are_exact(self, mailbox: ImapMailbox, seeded: Any) -> None:
        result, raws = seeded
        async with mailbox.pool.session() as session:
            first = await fetch_raw(session, ref(result, 0))
            second = await fetch_raw(session, ref(result, 1))
        assert raws[0] == first.raw and first.complete
        assert len(raws[0]) == first.size_bytes
        assert "\\Flagged" in second.flags and raws[1] == second.raw
        assert first.internal_date is not None and first.modseq > 0

    async def test_a_message_over_5_mib_is_cut_one_byte_past_the_limit(
        self, mailbox: ImapMailbox, seeded: Any
    ) -> None:
        result, raws = seeded
        async with mailbox.pool.session() as session:
            big = await fetch_raw(session, ref(result, 2))
        assert len(raws[2]) > RAW_PREFIX
        assert RAW_PREFIX + 1 == len(big.raw) and not big.complete
        assert raws[2][: RAW_PREFIX + 1] == big.raw

    async def test_reading_leaves_unread_mail_unread(
        self, mailbox: ImapMailbox, seeded: Any
    ) -> None:
        result, _ = seeded
        async with mailbox.pool.session() as session:
            await fetch_raw(session, ref(result, 0))
            again = await fetch_raw(session, ref(result, 0))
        assert "\\Seen" not in again.flags

    async def test_other_uidvalidity_is_stale(self, mailbox: ImapMailbox, seeded: Any) -> None:
        result, _ = seeded
        stale = Reference(folder=result.folder, uid_validity=result.uidvalidity + 1, uid=1)
        async with mailbox.pool.session() as session:
            with pytest.raises(errors.StaleReference):
                await fetch_raw(session, stale)

    async def test_a_stale_or_missing_folder_leaves_the_session_in_step(
        self, mailbox: ImapMailbox, seeded: Any
    ) -> None:
        # Each read sends its FETCH right behind the EXAMINE: both replies must be consumed
        # whatever the EXAMINE found, so the next read on the same session gets its own.
        result, raws = seeded
        stale = Reference(folder=result.folder, uid_validity=result.uidvalidity + 1, uid=1)
        gone = Reference(folder=result.folder + "-gone", uid_validity=1, uid=1)
        async with mailbox.pool.session() as session:
            with pytest.raises(errors.StaleReference):
                await fetch_raw(session, stale)
            with pytest.raises(errors.ServiceUnavailable, match="refused EXAMINE"):
                await fetch_raw(session, gone)
            assert session.usable
            after = await fetch_raw(session, ref(result, 0))
        assert raws[0] == after.raw

    @pytest.mark.parametrize("uid", [2, 99])
    async def test_absent_or_future_uid_is_not_found(
        self, mailbox: ImapMailbox, seeded: Any, services: Any, uid: int
    ) -> None:
        result, _ = seeded
        imap = await open_session(services)
        try:  # expunge the second message so its UID is a gap
            await imap.select(f'"{result.folder}"')
            await imap.uid("store", str(result.uids[1]), "+FLAGS.SILENT", "(\\Deleted)")
            await imap.uid("expunge", str(result.uids[1]))
        finally:
            await close_session(imap)
        missing = Reference(folder=result.folder, uid_validity=result.uidvalidity, uid=uid)
        async with mailbox.pool.session() as session:
            with pytest.raises(errors.NotFound):
                await fetch_raw(session, missing)

    async def test_missing_folder_is_service_unavailable(self, mailbox: ImapMailbox) -> None:
        gone = Reference(folder="No such folder", uid_validity=1, uid=1)
        async with mailbox.pool.session() as session:
            with pytest.raises(errors.ServiceUnavailable):
                await fetch_raw(session, gone)


class TestReadAhead:
    async def test_a_batch_reads_what_single_reads_read(
        self, mailbox: ImapMailbox, services: Any
    ) -> None:
        imap = await open_session(services)
        try:
            folder = await create_folder(imap, "ahead")
            corpus = sorted(CORPUS.glob("0*.eml"))[:6]
            result = await append_messages(imap, folder, [Append(p.read_bytes()) for p in corpus])
            await imap.select(f'"{folder}"')  # expunge the third so its UID is a gap
            await imap.uid("store", str(result.uids[2]), "+FLAGS.SILENT", "(\\Deleted)")
            await imap.uid("expunge", str(result.uids[2]))
        finally:
            await close_session(imap)
        planned = [ref(result, i) for i in range(6)]
        planned.insert(4, Reference(folder="INBOX", uid_validity=1, uid=1))  # another folder
        outcomes: list[object] = []
        async with mailbox.reader(planned) as reader:
            for reference in planned:
                try:
                    outcomes.append(await reader.read_raw(reference))
                except errors.MailError as exc:
                    outcomes.append(type(exc))
        single: list[object] = []
        for reference in planned:
            try:
                single.append(await mailbox.read_raw(reference))
            except errors.MailError as exc:
                single.append(type(exc))
        assert errors.NotFound is outcomes[2]
        assert errors.StaleReference is outcomes[4]
        assert single == outcomes
