"""Folders and capabilities as the real Dovecot reports them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from providers.imap import codec
from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from schemas.secret import Secret
from support.services import Services

pytestmark = pytest.mark.services


@pytest.fixture
async def mailbox(services: Services) -> AsyncIterator[ImapMailbox]:
    opened = ImapMailbox(
        ImapSettings(
            host=services.imap_host,
            port=services.imap_port,
            username=services.username,
            password=Secret(services.password),
            ca_file=str(services.ca_file),
            allow_private_hosts=True,
            timeout_s=10.0,
        )
    )
    yield opened
    await opened.aclose()


class TestCapabilities:
    async def test_dovecot_advertises_move_uidplus_condstore_and_special_use(
        self, mailbox: ImapMailbox
    ) -> None:
        server = await mailbox.capabilities()
        assert (server.move, server.uid_expunge, server.condstore, server.special_use) == (
            True,
            True,
            True,
            True,
        )

    async def test_special_folders_come_from_list_roles(self, mailbox: ImapMailbox) -> None:
        special = (await mailbox.capabilities()).special_folders
        assert special["trash"] == ["Trash"]
        assert special["drafts"] == ["Drafts"]
        assert special["sent"] == ["Sent"]
        assert special["junk"] == ["Junk"]
        assert special["archive"] == ["Archive"]

    async def test_not_gmail_so_permanent_delete_follows_uidplus(
        self, mailbox: ImapMailbox
    ) -> None:
        server = await mailbox.capabilities()
        assert (server.gmail_labels, server.permanent_delete, server.smtp_stores_sent) == (
            False,
            True,
            False,
        )

    async def test_imap_atoms_are_sorted_and_as_advertised(self, mailbox: ImapMailbox) -> None:
        atoms = (await mailbox.capabilities()).imap
        assert atoms == sorted(atoms)
        assert {"IMAP4rev1", "MOVE", "UIDPLUS", "CONDSTORE", "SPECIAL-USE"} <= set(atoms)


class TestFolders:
    async def test_the_standard_folders_are_listed_with_their_roles(
        self, mailbox: ImapMailbox
    ) -> None:
        folders = {f.name: f for f in await mailbox.folders()}
        assert {"INBOX", "Drafts", "Sent", "Trash", "Archive"} <= set(folders)
        assert "\\Drafts" in folders["Drafts"].attributes
        assert all(f.delimiter == "/" for f in folders.values())

    @pytest.mark.parametrize(
        "stem", ["Reisen * Ärger & Co", "日本語 メール", 'quote " and \\ back', "emoji 📬 box"]
    )
    async def test_a_folder_created_through_the_codec_lists_back_exactly(
        self, mailbox: ImapMailbox, stem: str
    ) -> None:
        name = f"{stem} {uuid.uuid4().hex[:6]}"
        async with mailbox.pool.session() as session:
            await session.command("CREATE", codec.mailbox_arg(name))
        try:
            listed = [f.name for f in await mailbox.folders()]
            assert name in listed
            async with mailbox.pool.session() as session:
                status = await session.status(name, ["MESSAGES"])
            assert status.mailbox == name
        finally:
            async with mailbox.pool.session() as session:
                await session.command("DELETE", codec.mailbox_arg(name))
