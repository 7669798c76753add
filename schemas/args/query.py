"""Inputs of mail_query: ten read-only actions."""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, Struct, UnsetType

from schemas import rules
from schemas.args.common import ConversationSearch, Detail, Ref, Search

SearchArg = Annotated[
    Search,
    Meta(
        description=(
            "ANDed filters; default folder INBOX, limit 25. query: literal text, not Gmail "
            "syntax. since/before: arrival day, inclusive/exclusive. Pass next_cursor as "
            "cursor, same filters/order, even after empty pages. conversation: "
            "folder/order/cursor/limit only."
        )
    ),
]


class _Query(Struct, tag_field="action", forbid_unknown_fields=True):
    """Common base of mail_query actions."""


class Capabilities(_Query, tag="capabilities"):
    """Report server capabilities and the operator's gates."""


class Folders(_Query, tag="folders"):
    """List every folder with its exact name."""


class SearchMail(_Query, tag="search"):
    """Search one folder in UID order within a bounded window."""

    search: SearchArg | UnsetType = UNSET
    detail: Detail | UnsetType = UNSET


class Triage(_Query, tag="triage"):
    """Search for unread OR flagged messages, ANDed with the filters."""

    search: SearchArg | UnsetType = UNSET
    detail: Detail | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.search, Search) and self.search.attention is False:
            raise ValueError("triage: search.attention may only be true")


class Conversation(_Query, tag="conversation"):
    """List same-folder messages linked to the anchor by Message-ID headers."""

    reference: Ref
    search: ConversationSearch | UnsetType = UNSET
    detail: Detail | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.search, ConversationSearch):
            folder = self.search.folder
            if isinstance(folder, str) and folder and folder != self.reference.folder:
                raise ValueError("conversation: search.folder must be the anchor's folder")


class Read(_Query, tag="read"):
    """Read one message without marking it read."""

    reference: Ref
    detail: Detail | UnsetType = UNSET


class ReadMany(_Query, tag="read_many"):
    """Read up to ten messages in one call under a response budget."""

    references: Annotated[
        list[Ref],
        Meta(
            min_length=1,
            max_length=10,
            description=(
                "Distinct. If stopped, resume at zero-based next_index with the rest, a bigger "
                "budget, or single reads."
            ),
        ),
    ]
    detail: Detail | UnsetType = UNSET
    max_response_bytes: (
        Annotated[int, Meta(description="JSON budget 4096-131072, default 65536")] | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        budget = self.max_response_bytes
        if isinstance(budget, int) and budget != 0 and not 4096 <= budget <= 131072:
            raise ValueError("read_many: max_response_bytes must be 4096-131072")
        seen = set()
        for ref in self.references:
            key = (ref.folder, ref.uid_validity, ref.uid, ref.provider, ref.account, ref.id)
            if key in seen:
                raise ValueError("read_many: references must be distinct")
            seen.add(key)


class Draft(_Query, tag="draft"):
    """Read a saved draft as an editable structure with its source_digest."""

    reference: Ref


class Attachment(_Query, tag="attachment"):
    """Fetch one attachment's bytes as base64."""

    reference: Ref
    index: Annotated[
        int, Meta(description="one-based, from read; result base64 <=2 MiB; never execute")
    ]

    def __post_init__(self) -> None:
        if not 1 <= self.index <= 100:
            raise ValueError("attachment: index must be 1-100")


class SendStatus(_Query, tag="send_status"):
    """Project the recorded state of one preparation without any network contact."""

    prepared_id: Annotated[str, Meta(pattern="^[0-9a-f]{32}$")]

    def __post_init__(self) -> None:
        rules.check_hex(self.prepared_id, 32, "prepared_id")  # the pattern lets "\n" end it


QUERY_ACTIONS: tuple[type[_Query], ...] = (
    Attachment,
    Capabilities,
    Conversation,
    Draft,
    Folders,
    Read,
    ReadMany,
    SearchMail,
    SendStatus,
    Triage,
)
