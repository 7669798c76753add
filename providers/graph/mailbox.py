"""The Mailbox protocol over Microsoft Graph: each operation checks `/me` first, then acts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Final, Literal

from providers.graph import folders, messages, search, sent_copy, writes
from providers.graph.account import GraphSettings, check_identity
from providers.graph.http import GraphHttp
from providers.graph.search import decode_cursor
from providers.mailbox import Appended, RawMessage, SentCopy
from schemas import errors
from schemas.mailbox import Folder, Reference, ServerCapabilities
from schemas.mutations import FlagResult, MutationResult
from schemas.search import ConversationQuery, SearchQuery, SummaryPage

NO_CONVERSATION: Final = (
    "Microsoft Graph has no same-folder conversation view here; search by subject or "
    "message_id instead"
)
NO_PERMANENT_DELETE: Final = (
    "Microsoft Graph messages cannot be deleted permanently here; use trash"
)
SENT_IS_AUTOMATIC: Final = (
    "Microsoft files sent messages in Sent Items itself; use append_sent=false"
)


class GraphReader:
    """Sequential reads for read_many; Graph needs no session, so this is the mailbox itself."""

    def __init__(self, mailbox: GraphMailbox) -> None:
        self._mailbox = mailbox

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message without marking it read."""
        return await self._mailbox.read_raw(reference)


class GraphMailbox:
    """A Mailbox served by one delegated Microsoft Graph account."""

    def __init__(self, settings: GraphSettings) -> None:
        self.settings = settings
        self.http = GraphHttp(settings.tokens, settings.timeout_s)

    def __repr__(self) -> str:
        return f"GraphMailbox({self.settings!r})"

    async def _checked(self) -> GraphHttp:
        await check_identity(self.http, self.settings)
        return self.http

    def _ref(self, reference: Reference) -> Reference:
        return messages.graph_reference(reference, self.settings)

    async def capabilities(self) -> ServerCapabilities:
        """Report what Graph supports and its well-known folders."""
        return await folders.capabilities(await self._checked())

    async def folders(self) -> list[Folder]:
        """List every visible folder breadth first (name = native ID)."""
        return await folders.list_folders(await self._checked())

    async def search(self, query: SearchQuery) -> SummaryPage:
        """Run one page of a search or triage; a foreign cursor fails before any request."""
        decode_cursor(self.settings.cursor_key, query)
        return await search.search_page(await self._checked(), self.settings, query)

    async def conversation(self, query: ConversationQuery) -> SummaryPage:
        """Refuse: Graph has no conversation here."""
        raise errors.UnsupportedOperation(NO_CONVERSATION)

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message's metadata and bounded MIME without marking it read."""
        ref = self._ref(reference)
        return await messages.read_raw(await self._checked(), ref)

    async def append_sent(self, raw: bytes) -> Appended:
        """Refuse: Microsoft files Sent itself."""
        raise errors.UnsupportedOperation(SENT_IS_AUTOMATIC)

    async def append_draft(self, raw: bytes, folder: str | None = None) -> Appended:
        """Upload a MIME draft to `folder` or Drafts."""
        if folder:
            writes.destination_id(folder)
        return await writes.append_draft(await self._checked(), self.settings, raw, folder)

    async def find_sent_copies(self, message_id: str) -> list[SentCopy]:
        """Find Sent Items copies carrying exactly this Message-ID (read-only)."""
        http = await self._checked()
        return await sent_copy.find_sent_copies(http, self.settings.account_id, message_id)

    async def create_folder(self, name: str) -> None:
        """Create one top-level folder with this display name."""
        await writes.create_folder(await self._checked(), name)

    async def rename_folder(self, old: str, new: str) -> None:
        """Give a folder (native ID) a new display name."""
        folders.folder_path(old)
        await writes.rename_folder(await self._checked(), old, new)

    async def copy(self, reference: Reference, destination: str) -> MutationResult:
        """Copy one message to a folder."""
        ref = self._ref(reference)
        writes.destination_id(destination)
        return await writes.relocate(
            await self._checked(), self.settings, ref, destination, "copy", "copied"
        )

    async def move(self, reference: Reference, destination: str) -> MutationResult:
        """Move one message to a folder (its immutable ID stays)."""
        ref = self._ref(reference)
        writes.destination_id(destination)
        return await writes.relocate(
            await self._checked(), self.settings, ref, destination, "move", "moved"
        )

    async def trash(self, reference: Reference) -> MutationResult:
        """Move one message to Deleted Items."""
        ref = self._ref(reference)
        return await writes.relocate(
            await self._checked(), self.settings, ref, "deleteditems", "move", "moved"
        )

    async def change_flags(
        self,
        reference: Reference,
        operation: Literal["add", "remove"],
        flags: Sequence[str],
        unchanged_since: int = 0,
    ) -> FlagResult:
        """Set or clear \\Seen and \\Flagged; nothing else, and never conditionally."""
        ref = self._ref(reference)
        writes.graph_flags(flags, unchanged_since)
        return await writes.change_flags(
            await self._checked(), self.settings, ref, operation, flags, unchanged_since
        )

    async def delete_permanently(self, reference: Reference) -> MutationResult:
        """Refuse: Graph has no permanent delete here."""
        raise errors.UnsupportedOperation(NO_PERMANENT_DELETE)

    @asynccontextmanager
    async def reader(self, planned: Sequence[Reference] = ()) -> AsyncIterator[GraphReader]:
        """Lend a reader for a batch of reads (Graph reads one message per request anyway)."""
        yield GraphReader(self)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.http.aclose()
