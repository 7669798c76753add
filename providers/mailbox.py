"""The mailbox the operations talk to, whatever provider serves it."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Literal, Protocol

from msgspec import Struct

from schemas.mailbox import Folder, Reference, ServerCapabilities
from schemas.mutations import FlagResult, MutationResult
from schemas.search import ConversationQuery, SearchQuery, SummaryPage

RAW_PREFIX = 5 * 1024 * 1024  # bytes of a message a read may use


class RawMessage(Struct, frozen=True):
    """A message as a read sees it: metadata plus at most the first 5 MiB + 1 raw bytes."""

    reference: Reference
    flags: list[str]
    internal_date: datetime | None
    size_bytes: int
    modseq: int
    raw: bytes

    @property
    def complete(self) -> bool:
        """Tell whether every byte of the message was read (and it is within 5 MiB)."""
        return self.size_bytes <= len(self.raw) <= RAW_PREFIX


class Appended(Struct, frozen=True):
    """Where an APPEND landed; uid fields are 0 when the server gave no APPENDUID.

    A Microsoft Graph upload has no UID: `reference` is the whole Graph reference instead.
    """

    folder: str
    uid_validity: int = 0
    uid: int = 0
    reference: Reference | None = None


class SentCopy(Struct, frozen=True, kw_only=True):
    """A message in a \\Sent folder whose own Message-ID is exactly the one searched for."""

    folder: str  # for the person running the search; the ledger never records it
    uid_validity: int
    uid: int
    size: int  # RFC822.SIZE
    sha256: str | None  # of the exact bytes; None when larger than the read limit (5 MiB)
    graph_id: str = ""  # a Microsoft Graph copy's immutable ID (its uid fields are then 0)


class RawReader(Protocol):
    """Reads several messages on one connection (a read_many batch)."""

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message like Mailbox.read_raw, reusing the connection's selected folder."""
        ...


class Mailbox(Protocol):
    """One configured mailbox; every method raises only schemas.errors types."""

    async def capabilities(self) -> ServerCapabilities:
        """Report what the server supports (the `server` object of capabilities)."""
        ...

    async def folders(self) -> list[Folder]:
        """List every folder in server order."""
        ...

    async def search(self, query: SearchQuery) -> SummaryPage:
        """Run one bounded search or triage window."""
        ...

    async def conversation(self, query: ConversationQuery) -> SummaryPage:
        """Run one bounded window of a same-folder conversation."""
        ...

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message with BODY.PEEK, never setting \\Seen."""
        ...

    async def append_sent(self, raw: bytes) -> Appended:
        """APPEND a sent message to the unique Sent folder (\\Seen); never retried."""
        ...

    async def append_draft(self, raw: bytes, folder: str | None = None) -> Appended:
        """APPEND a draft with \\Draft to `folder` or the unique Drafts folder; never retried."""
        ...

    async def find_sent_copies(self, message_id: str) -> list[SentCopy]:
        """Find the copies carrying exactly this Message-ID in every \\Sent folder (read-only)."""
        ...

    async def create_folder(self, name: str) -> None:
        """CREATE one folder; never retried."""
        ...

    async def rename_folder(self, old: str, new: str) -> None:
        """RENAME one folder, visible to every client; never retried."""
        ...

    async def copy(self, reference: Reference, destination: str) -> MutationResult:
        """Copy one message to an existing folder."""
        ...

    async def move(self, reference: Reference, destination: str) -> MutationResult:
        """Move one message with the server's native MOVE."""
        ...

    async def trash(self, reference: Reference) -> MutationResult:
        """Move one message to the single advertised Trash folder."""
        ...

    async def change_flags(
        self,
        reference: Reference,
        operation: Literal["add", "remove"],
        flags: Sequence[str],
        unchanged_since: int = 0,
    ) -> FlagResult:
        """Add or remove flags on one message, conditionally under CONDSTORE."""
        ...

    async def delete_permanently(self, reference: Reference) -> MutationResult:
        """Expunge exactly one message by UID and confirm it is gone."""
        ...

    def reader(self, planned: Sequence[Reference] = ()) -> AbstractAsyncContextManager[RawReader]:
        """Lend one connection for a sequence of reads of the `planned` references."""
        ...

    async def aclose(self) -> None:
        """Release every connection."""
        ...
