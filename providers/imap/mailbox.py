"""The Mailbox protocol over IMAP: each call borrows a pooled, logged-in session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Literal

from providers.imap import write
from providers.imap.append import append_to_role
from providers.imap.connect import connect
from providers.imap.conversation import conversation_page, decode_conversation_cursor
from providers.imap.discovery import list_folders, server_capabilities
from providers.imap.drafts import append_draft
from providers.imap.fetch import fetch_raw
from providers.imap.pool import ImapPool
from providers.imap.read_ahead import ImapReader
from providers.imap.search import decode_search_cursor, search_page
from providers.imap.sent_copy import find_candidates, read_copy
from providers.imap.session import ImapSession
from providers.imap.settings import ImapSettings
from providers.imap.write_delete import delete_permanently
from providers.imap.write_flags import change_flags
from providers.mailbox import Appended, RawMessage, SentCopy
from schemas.mailbox import Folder, Reference, ServerCapabilities
from schemas.mutations import FlagResult, MutationResult
from schemas.search import ConversationQuery, SearchQuery, SummaryPage


class ImapMailbox:
    """A Mailbox served by one IMAP account through a pool of at most `pool_size` sessions."""

    def __init__(self, settings: ImapSettings, pool_size: int = 4) -> None:
        self._settings = settings
        self.pool = ImapPool(self._open, size=pool_size)

    async def _open(self) -> ImapSession:
        return await connect(self._settings)

    async def capabilities(self) -> ServerCapabilities:
        """Report the server's capabilities and special-use folders."""
        async with self.pool.session() as session:
            return await server_capabilities(session, self._settings)

    async def folders(self) -> list[Folder]:
        """List every folder in server order."""
        async with self.pool.session() as session:
            return await list_folders(session)

    async def search(self, query: SearchQuery) -> SummaryPage:
        """Run one bounded search or triage window; a bad cursor fails before any connection."""
        cursor = decode_search_cursor(query)
        async with self.pool.session() as session:
            return await search_page(session, query, cursor)

    async def conversation(self, query: ConversationQuery) -> SummaryPage:
        """Run one bounded conversation window; a foreign cursor fails before any connection."""
        cursor = decode_conversation_cursor(query)
        async with self.pool.session() as session:
            return await conversation_page(session, query, cursor)

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message's metadata and first 5 MiB + 1 bytes without setting \\Seen."""
        async with self.pool.session() as session:
            return await fetch_raw(session, reference)

    async def append_sent(self, raw: bytes) -> Appended:
        """APPEND a sent message to the unique \\Sent folder with \\Seen."""
        async with self.pool.session() as session:
            return await append_to_role(session, "sent", raw, ("\\Seen",))

    async def append_draft(self, raw: bytes, folder: str | None = None) -> Appended:
        """APPEND a draft with \\Draft to `folder` or the unique \\Drafts folder."""
        async with self.pool.session() as session:
            return await append_draft(session, raw, folder)

    async def find_sent_copies(self, message_id: str) -> list[SentCopy]:
        """Search every \\Sent folder read-only for copies with exactly this Message-ID.

        Each copy's bytes are read on a session lease of its own, so every read has the full
        read budget.
        """
        async with self.pool.session() as session:
            candidates = await find_candidates(session, message_id)
        copies: list[SentCopy] = []
        for candidate in candidates:
            async with self.pool.session() as session:
                copy = await read_copy(session, candidate)
            if copy is not None:
                copies.append(copy)
        return copies

    async def create_folder(self, name: str) -> None:
        """CREATE one folder; a NO (it exists, say) is unavailable, a lost reply unknown."""
        await write.create_folder(self.pool, name)

    async def rename_folder(self, old: str, new: str) -> None:
        """RENAME one folder."""
        await write.rename_folder(self.pool, old, new)

    async def copy(self, reference: Reference, destination: str) -> MutationResult:
        """UID COPY one message; the destination reference only from a single-UID COPYUID."""
        return await write.copy_message(self.pool, reference, destination)

    async def move(self, reference: Reference, destination: str) -> MutationResult:
        """UID MOVE one message; refused without the MOVE capability."""
        return await write.move_message(self.pool, reference, destination)

    async def trash(self, reference: Reference) -> MutationResult:
        """UID MOVE one message to the unique \\Trash folder."""
        return await write.trash_message(self.pool, reference)

    async def change_flags(
        self,
        reference: Reference,
        operation: Literal["add", "remove"],
        flags: Sequence[str],
        unchanged_since: int = 0,
    ) -> FlagResult:
        """UID STORE a flag delta, with UNCHANGEDSINCE under CONDSTORE."""
        return await change_flags(self.pool, reference, operation, flags, unchanged_since)

    async def delete_permanently(self, reference: Reference) -> MutationResult:
        """Mark \\Deleted, UID EXPUNGE that one UID and verify it is gone."""
        return await delete_permanently(self.pool, self._settings, reference)

    @asynccontextmanager
    async def reader(self, planned: Sequence[Reference] = ()) -> AsyncIterator[ImapReader]:
        """Lend one pooled session for a batch of reads of the `planned` references."""
        async with self.pool.session() as session:
            yield ImapReader(session, planned)

    async def aclose(self) -> None:
        """Log out every pooled session."""
        await self.pool.aclose()
