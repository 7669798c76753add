"""The Mailbox protocol over IMAP: each call borrows a pooled, logged-in session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from providers.imap.append import append_to_role
from providers.imap.connect import connect
from providers.imap.conversation import conversation_page, decode_conversation_cursor
from providers.imap.discovery import list_folders, server_capabilities
from providers.imap.drafts import append_draft
from providers.imap.fetch import fetch_raw
from providers.imap.pool import ImapPool
from providers.imap.search import decode_search_cursor, search_page
from providers.imap.session import ImapSession
from providers.imap.settings import ImapSettings
from providers.mailbox import Appended, RawMessage
from schemas.mailbox import Folder, Reference, ServerCapabilities
from schemas.search import ConversationQuery, SearchQuery, SummaryPage


class ImapReader:
    """Sequential reads on one leased session; the selected folder is reused between them."""

    def __init__(self, session: ImapSession) -> None:
        self._session = session

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message without setting \\Seen."""
        return await fetch_raw(self._session, reference, reuse_selection=True)


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

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[ImapReader]:
        """Lend one pooled session for a batch of reads."""
        async with self.pool.session() as session:
            yield ImapReader(session)

    async def aclose(self) -> None:
        """Log out every pooled session."""
        await self.pool.aclose()
