"""mail_query search, triage and conversation: bounded pages in summary or full detail."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Struct

from schemas.args.query import Conversation, SearchMail, Triage
from schemas.search import (
    COVERAGE_NOTE,
    SELECTION_NOTE,
    CompactSummary,
    ConversationPage,
    SearchFullPage,
    SearchPage,
    SummaryPage,
    TriagePage,
    compact_row,
    conversation_query,
    page_counts,
    search_query,
)
from service.context import AppContext
from service.operations.query import require_mailbox
from service.principal import Principal


def _compact(page: SummaryPage) -> list[CompactSummary]:
    return [compact_row(m, page.folder, page.uid_validity) for m in page.messages]


async def search(app: AppContext, principal: Principal, args: SearchMail) -> Struct:
    """Search one folder within one window of at most 1000 UIDs; never changes \\Seen."""
    query = search_query(args.search, "search")
    page = await require_mailbox(app).search(query)
    cursor = page.next_cursor if page.next_cursor is not None else UNSET
    if args.detail == "full":
        return SearchFullPage(
            messages=page.messages, next_cursor=cursor, order=page.order, **_window(page)
        )
    return SearchPage(
        folder=page.folder,
        messages=_compact(page),
        order=page.order,
        next_cursor=cursor,
        **_window(page),
    )


async def triage(app: AppContext, principal: Principal, args: Triage) -> Struct:
    """Search for unread OR flagged messages ANDed with the filters, with page-only counts."""
    query = search_query(args.search, "triage")
    page = await require_mailbox(app).search(query)
    return TriagePage[Any](
        **_hoisted(page, full=args.detail == "full"),
        page_counts=page_counts(page.messages),
        selection=SELECTION_NOTE,
    )


async def conversation(app: AppContext, principal: Principal, args: Conversation) -> Struct:
    """List the anchor folder's messages linked to the anchor's fixed Message-ID set."""
    query = conversation_query(args)
    page = await require_mailbox(app).conversation(query)
    return ConversationPage[Any](
        **_hoisted(page, full=args.detail == "full"),
        anchor=query.anchor,
        coverage=COVERAGE_NOTE,
    )


def _window(page: SummaryPage) -> dict[str, Any]:
    """What the page says about its window: UIDVALIDITY and UIDs scanned (IMAP), or the
    provider and its warnings (Microsoft Graph, which has neither)."""
    if page.provider:
        return {"provider": page.provider, "warnings": page.warnings}
    return {"uid_validity": page.uid_validity, "scanned_uids": page.scanned_uids}


def _hoisted(page: SummaryPage, *, full: bool) -> dict[str, Any]:
    """The page fields triage and conversation share: folder and UIDVALIDITY hoisted, rows."""
    return {
        "folder": page.folder,
        "messages": page.messages if full else _compact(page),
        "order": page.order,
        "next_cursor": page.next_cursor if page.next_cursor is not None else UNSET,
        **_window(page),
    }
