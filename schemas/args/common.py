"""Input shapes shared by several tools: the message reference, search filters, composition."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType, field

from schemas import rules

UInt32 = Annotated[int, Meta(ge=0, le=rules.UINT32_MAX)]
Detail = Annotated[
    Literal["summary", "full"], Meta(description="default summary; full restores clipped text")
]
Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
# 0 is the default (25), kept for older clients; the schema and the decoder share these bounds.
SearchLimit = Annotated[int, Meta(ge=0, le=rules.MAX_SEARCH_LIMIT)]
Day = Annotated[str, Meta(pattern=rules.DAY_PATTERN)]


class Ref(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """An exact message reference: IMAP folder + uid_validity + uid, or a whole Graph reference."""

    folder: str
    uid_validity: UInt32 = 0
    uid: UInt32 = 0
    provider: str = ""
    account: str = ""
    id: str = ""

    def __post_init__(self) -> None:
        if self.provider:
            if self.provider != "microsoft_graph":
                raise ValueError("reference.provider must be omitted or microsoft_graph")
            if self.uid or self.uid_validity:
                raise ValueError("a microsoft_graph reference carries no uid or uid_validity")
            rules.check_graph_id(self.folder, "reference.folder")
            rules.check_graph_id(self.account, "reference.account")
            rules.check_graph_id(self.id, "reference.id")
            return
        if self.account or self.id:
            raise ValueError("an IMAP reference has no account or id")
        rules.check_folder_name(self.folder, "reference.folder")
        if self.uid_validity == 0 or self.uid == 0:
            raise ValueError("reference needs non-zero uid_validity and uid")

    @property
    def is_graph(self) -> bool:
        """Tell whether this is a Microsoft Graph reference."""
        return bool(self.provider)


Order = Annotated[
    Literal["", "newest", "oldest"], Meta(description="by UID; default newest")
]


class Search(Struct, forbid_unknown_fields=True):
    """Search filters for search and triage; every supplied filter is ANDed."""

    folder: str | UnsetType = UNSET
    query: str | UnsetType = UNSET
    order: Order | UnsetType = UNSET
    from_: str | UnsetType = field(default=UNSET, name="from")
    to: str | UnsetType = UNSET
    subject: str | UnsetType = UNSET
    participant: (
        Annotated[str, Meta(description="From/Reply-To/To/Cc substring, any case; never Bcc")]
        | UnsetType
    ) = UNSET
    message_id: Annotated[str, Meta(description="exact, case-sensitive")] | UnsetType = UNSET
    since: Day | UnsetType = UNSET
    before: Day | UnsetType = UNSET
    unread: bool | UnsetType | None = UNSET
    flagged: bool | UnsetType | None = UNSET
    attention: Annotated[bool, Meta(description="unread OR flagged, ANDed")] | UnsetType = UNSET
    cursor: str | UnsetType = UNSET
    limit: SearchLimit | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.folder, str) and self.folder:
            rules.check_folder_name(self.folder, "search.folder")
        for name in ("query", "from_", "to", "subject"):
            value = getattr(self, name)
            if isinstance(value, str):
                rules.check_filter_text(value, f"search.{name.rstrip('_')}", allow_controls=True)
        if isinstance(self.participant, str):
            rules.check_filter_text(self.participant, "search.participant")
        if isinstance(self.message_id, str):
            rules.check_filter_text(self.message_id, "search.message_id")
        since = rules.parse_day(self.since, "search.since") if self.since else None
        before = rules.parse_day(self.before, "search.before") if self.before else None
        if since and before and not since < before:
            raise ValueError("search.since must be earlier than search.before")
        _check_cursor(self.cursor)


class ConversationSearch(Struct, forbid_unknown_fields=True):
    """The only search keys conversation accepts: folder, order, cursor and limit."""

    folder: str | UnsetType = UNSET
    order: Order | UnsetType = UNSET
    cursor: str | UnsetType = UNSET
    limit: SearchLimit | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.folder, str) and self.folder:
            rules.check_folder_name(self.folder, "search.folder")
        _check_cursor(self.cursor)


def _check_cursor(cursor: str | UnsetType) -> None:
    if isinstance(cursor, str) and len(cursor) > rules.MAX_CURSOR_CHARS:
        raise ValueError(f"search.cursor must be at most {rules.MAX_CURSOR_CHARS} characters")


class AttachmentIn(Struct, forbid_unknown_fields=True):
    """A caller-supplied file for a composed message."""

    filename: Annotated[str, Meta(description="no path")]
    content_type: Annotated[str, Meta(description="e.g. application/pdf")]
    data_base64: Annotated[str, Meta(description="padded base64; all files <=3 MiB")]


class Message(Struct, forbid_unknown_fields=True):
    """A composition: recipients, subject, bodies, files and threading; never the sender."""

    to: list[str] | UnsetType = UNSET
    cc: list[str] | UnsetType = UNSET
    bcc: list[str] | UnsetType = UNSET
    subject: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    html: Annotated[str, Meta(description="review before sending")] | UnsetType = UNSET
    attachments: list[AttachmentIn] | UnsetType = UNSET
    in_reply_to: str | UnsetType = UNSET
    references: list[str] | UnsetType = UNSET

    def present(self) -> list[str]:
        """Name the members the caller supplied."""
        return [f for f in self.__struct_fields__ if getattr(self, f) is not UNSET]
