"""The mailbox the operations talk to, whatever provider serves it."""

from __future__ import annotations

from typing import Protocol

from schemas.mailbox import Folder, ServerCapabilities
from schemas.search import ConversationQuery, SearchQuery, SummaryPage


class Mailbox(Protocol):
    """One configured mailbox; every method raises only schemas.errors types."""

    async def capabilities(self) -> ServerCapabilities:
        """Report what the server supports (the `server` object of tools.md §7.1)."""
        ...

    async def folders(self) -> list[Folder]:
        """List every folder in server order (tools.md §7.2)."""
        ...

    async def search(self, query: SearchQuery) -> SummaryPage:
        """Run one bounded search or triage window (tools.md §7.3-7.4)."""
        ...

    async def conversation(self, query: ConversationQuery) -> SummaryPage:
        """Run one bounded window of a same-folder conversation (tools.md §7.5)."""
        ...

    async def aclose(self) -> None:
        """Release every connection."""
        ...
