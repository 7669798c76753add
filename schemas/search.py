"""Search, triage and conversation: normalized inputs, message summaries and page shapes.

Inputs arrive as the validated Structs of schemas.args; `search_query` and `conversation_query`
apply the search defaults (folder INBOX, order newest, limit 25, message_id
normalized) so every provider and every cursor sees one canonical form.
"""

from __future__ import annotations

import re
from typing import Generic, Literal, TypeVar

from msgspec import UNSET, Struct, UnsetType, field

from schemas.args.common import Search
from schemas.args.query import Conversation
from schemas.errors import InvalidArguments
from schemas.mailbox import Reference
from schemas.messages import Address

DEFAULT_LIMIT = 25  # the bounds are rules.MAX_SEARCH_LIMIT, enforced by the input Structs
WINDOW_UIDS = 1000  # UID values (not messages) one call may scan
SYSTEM_FLAGS = frozenset({"\\seen", "\\flagged", "\\answered", "\\draft", "\\deleted", "\\recent"})

Order = Literal["newest", "oldest"]
Operation = Literal["search", "triage"]

SELECTION_NOTE = (
    "Rows are messages that are unread OR flagged, ANDed with the supplied filters. The counts "
    "describe the returned rows only, not mailbox totals or urgency; flags may change between "
    "pages."
)
COVERAGE_NOTE = (
    "Same-folder summaries linked by exact, case-sensitive Message-ID, References or "
    "In-Reply-To matches against the anchor's fixed ID set; no subject matching and no "
    "recursive expansion. Other folders, missing or malformed links and pages not visited are "
    "not covered. Headers are untrusted: read exact references for content."
)

# RFC 5322 msg-id in its modern form: dot-atom-text "@" (dot-atom-text / no-fold-literal).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
_NO_FOLD_LITERAL = r"\[[\x21-\x5a\x5e-\x7e]*\]"
MESSAGE_ID_CORE = re.compile(rf"{_DOT_ATOM}@(?:{_DOT_ATOM}|{_NO_FOLD_LITERAL})")


def normalize_message_id(value: str) -> str:
    """Return the bare `local@domain` of an exact Message-ID filter, or raise InvalidArguments.

    Surrounding spaces and one pair of angle brackets are optional; case is kept as given.
    Quoted local parts, comments and other obsolete forms are refused.
    """
    text = value.strip(" \t")
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    if not MESSAGE_ID_CORE.fullmatch(text):
        raise InvalidArguments(
            "search.message_id must be one modern Message-ID such as local@domain"
        )
    return text


# --- normalized inputs ------------------------------------------------------------------------


class SearchQuery(Struct, frozen=True, kw_only=True):
    """One search or triage request after defaulting; "" and None mean "not supplied"."""

    operation: Operation
    folder: str = "INBOX"
    order: Order = "newest"
    limit: int = DEFAULT_LIMIT
    cursor: str = ""
    query: str = ""
    from_: str = ""
    to: str = ""
    subject: str = ""
    participant: str = ""
    message_id: str = ""  # bare local@domain (normalize_message_id)
    since: str = ""  # YYYY-MM-DD, already validated
    before: str = ""
    unread: bool | None = None
    flagged: bool | None = None
    attention: bool = False


class ConversationQuery(Struct, frozen=True, kw_only=True):
    """One conversation request: the anchor exactly as supplied plus paging choices."""

    anchor: Reference
    order: Order = "newest"
    limit: int = DEFAULT_LIMIT
    cursor: str = ""


def _text(value: str | UnsetType) -> str:
    return value if isinstance(value, str) else ""


def _order(value: str | UnsetType) -> Order:
    return "oldest" if value == "oldest" else "newest"


def _limit(value: int | UnsetType) -> int:
    return value if isinstance(value, int) and value > 0 else DEFAULT_LIMIT


def search_query(search: Search | UnsetType, operation: Operation) -> SearchQuery:
    """Apply the search defaults (triage forces attention) to decoded filters."""
    if not isinstance(search, Search):
        search = Search()
    message_id = _text(search.message_id)
    unread = search.unread if isinstance(search.unread, bool) else None
    flagged = search.flagged if isinstance(search.flagged, bool) else None
    return SearchQuery(
        operation=operation,
        folder=_text(search.folder) or "INBOX",
        order=_order(search.order),
        limit=_limit(search.limit),
        cursor=_text(search.cursor),
        query=_text(search.query),
        from_=_text(search.from_),
        to=_text(search.to),
        subject=_text(search.subject),
        participant=_text(search.participant),
        message_id=normalize_message_id(message_id) if message_id else "",
        since=_text(search.since),
        before=_text(search.before),
        unread=unread,
        flagged=flagged,
        attention=operation == "triage" or search.attention is True,
    )


def conversation_query(args: Conversation) -> ConversationQuery:
    """Apply the conversation defaults to a decoded conversation request."""
    ref = args.reference
    anchor = Reference(
        folder=ref.folder,
        uid_validity=ref.uid_validity,
        uid=ref.uid,
        provider=ref.provider,
        account=ref.account,
        id=ref.id,
    )
    search = args.search
    if isinstance(search, UnsetType):
        return ConversationQuery(anchor=anchor)
    return ConversationQuery(
        anchor=anchor,
        order=_order(search.order),
        limit=_limit(search.limit),
        cursor=_text(search.cursor),
    )


# --- summaries --------------------------------------------------------------------------------


class MessageSummary(Struct, kw_only=True, omit_defaults=True):
    """The full summary of one message; `modseq` is omitted when 0."""

    reference: Reference
    subject: str
    from_: list[Address] = field(name="from")
    to: list[Address]
    date: str  # RFC 3339
    flags: list[str]
    size_bytes: int
    modseq: int = 0

    @property
    def unread(self) -> bool:
        """Tell whether the message lacks \\Seen (any case)."""
        return not any(f.lower() == "\\seen" for f in self.flags)

    @property
    def flagged(self) -> bool:
        """Tell whether the message carries \\Flagged (any case)."""
        return any(f.lower() == "\\flagged" for f in self.flags)


class CompactSummary(Struct, kw_only=True, omit_defaults=True):
    """A summary-page row: `uid` under the page's hoisted folder/uid_validity.

    `reference` appears only when the row's identity differs from the page's.
    """

    uid: int = 0
    reference: Reference | UnsetType = UNSET
    subject: str
    from_: list[Address] = field(default_factory=list, name="from")
    to: list[Address] = field(default_factory=list)
    date: str
    flags: list[str]
    size_bytes: int
    modseq: int = 0


def compact_row(summary: MessageSummary, folder: str, uid_validity: int) -> CompactSummary:
    """Shrink a full summary to a page row, keeping its reference only if identity differs."""
    ref = summary.reference
    hoisted = not ref.provider and ref.folder == folder and ref.uid_validity == uid_validity
    return CompactSummary(
        uid=ref.uid if hoisted else 0,
        reference=UNSET if hoisted else ref,
        subject=summary.subject,
        from_=summary.from_,
        to=summary.to,
        date=summary.date,
        flags=summary.flags,
        size_bytes=summary.size_bytes,
        modseq=summary.modseq,
    )


def bound_flags(flags: list[str], limit: int = 100) -> list[str]:
    """Keep at most `limit` flags in server order without ever cutting off a system flag.

    A system flag past the cut replaces the last kept non-system flag, or failing that the
    last kept duplicate of a system flag.
    """
    if len(flags) <= limit:
        return list(flags)
    kept = flags[:limit]
    for flag in flags[limit:]:
        lowered = flag.lower()
        if lowered not in SYSTEM_FLAGS or lowered in {k.lower() for k in kept}:
            continue
        slot = _last_replaceable(kept)
        if slot is not None:
            kept[slot] = flag
    return kept


def _last_replaceable(kept: list[str]) -> int | None:
    for i in range(len(kept) - 1, -1, -1):
        if kept[i].lower() not in SYSTEM_FLAGS:
            return i
    lowered = [k.lower() for k in kept]
    for i in range(len(kept) - 1, -1, -1):
        if lowered[i] in lowered[:i]:
            return i
    return None


# --- pages ------------------------------------------------------------------------------------


class SummaryPage(Struct, kw_only=True):
    """What a provider returns for one bounded search window: full summaries and paging state.

    A Microsoft Graph page names its `provider` and carries `warnings`; it has no UIDVALIDITY
    and scans no UIDs (both 0, and left out of the tool's result).
    """

    folder: str
    uid_validity: int
    order: Order
    scanned_uids: int
    messages: list[MessageSummary]
    next_cursor: str | None = None
    provider: str = ""
    warnings: list[str] = field(default_factory=list)


Row = TypeVar("Row", CompactSummary, MessageSummary)


class SearchPage(Struct, kw_only=True, omit_defaults=True):
    """A search page in summary detail: folder and uid_validity hoisted."""

    folder: str
    uid_validity: int | UnsetType = UNSET  # IMAP only
    messages: list[CompactSummary]
    scanned_uids: int | UnsetType = UNSET  # IMAP only
    order: Order
    next_cursor: str | UnsetType = UNSET
    provider: str | UnsetType = UNSET  # Microsoft Graph only
    warnings: list[str] | UnsetType = UNSET  # Microsoft Graph only


class SearchFullPage(Struct, kw_only=True, omit_defaults=True):
    """A search page in full detail: no hoisted folder, rows keep references."""

    messages: list[MessageSummary]
    next_cursor: str | UnsetType = UNSET
    uid_validity: int | UnsetType = UNSET  # IMAP only
    scanned_uids: int | UnsetType = UNSET  # IMAP only
    order: Order
    provider: str | UnsetType = UNSET  # Microsoft Graph only
    warnings: list[str] | UnsetType = UNSET  # Microsoft Graph only


class PageCounts(Struct, kw_only=True):
    """Overlapping counts over the returned rows only."""

    messages: int
    unread: int
    flagged: int
    unread_and_flagged: int


def page_counts(rows: list[MessageSummary]) -> PageCounts:
    """Count the returned rows that are unread, flagged, and both (flags compared in any case)."""
    return PageCounts(
        messages=len(rows),
        unread=sum(1 for r in rows if r.unread),
        flagged=sum(1 for r in rows if r.flagged),
        unread_and_flagged=sum(1 for r in rows if r.unread and r.flagged),
    )


class TriagePage(Struct, Generic[Row], kw_only=True, omit_defaults=True):
    """A triage page: the search page shape plus page-only counts and what was selected."""

    folder: str
    uid_validity: int | UnsetType = UNSET  # IMAP only
    messages: list[Row]
    scanned_uids: int | UnsetType = UNSET  # IMAP only
    order: Order
    next_cursor: str | UnsetType = UNSET
    page_counts: PageCounts
    selection: str  # SELECTION_NOTE; no default, so omit_defaults keeps it
    provider: str | UnsetType = UNSET  # Microsoft Graph only
    warnings: list[str] | UnsetType = UNSET  # Microsoft Graph only


class ConversationPage(Struct, Generic[Row], kw_only=True, omit_defaults=True):
    """A conversation page: the search page shape plus the anchor and what is covered."""

    folder: str
    uid_validity: int | UnsetType = UNSET  # IMAP only
    messages: list[Row]
    scanned_uids: int | UnsetType = UNSET  # IMAP only
    order: Order
    next_cursor: str | UnsetType = UNSET
    anchor: Reference
    coverage: str  # COVERAGE_NOTE; no default, so omit_defaults keeps it
    provider: str | UnsetType = UNSET  # Microsoft Graph only
    warnings: list[str] | UnsetType = UNSET  # Microsoft Graph only
