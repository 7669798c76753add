"""Bounded search and triage over IMAP: one read-only window per call.

The folder is opened with EXAMINE and only summary fields are fetched with BODY.PEEK, so a
search never changes \\Seen. Every filter becomes a UID SEARCH criterion through the codec;
text goes out quoted when ASCII, else as a literal under `CHARSET UTF-8`.
"""

from __future__ import annotations

from datetime import date

import msgspec

from providers.imap import codec
from providers.imap.codec import Arg
from providers.imap.conversation import LinkSection, select_verified
from providers.imap.cursor import (
    SEARCH_FORMAT,
    CursorState,
    check_generation,
    check_scope,
    decode_cursor,
    plan_window,
    scope_digest,
    take,
)
from providers.imap.session import ImapSession
from providers.imap.summaries import summary_page
from schemas.search import SearchQuery, SummaryPage

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MESSAGE_ID_FIELD = ("MESSAGE-ID",)


def search_scope(query: SearchQuery) -> str:
    """Digest what a search cursor binds: operation, folder, every filter and the order."""
    bound = msgspec.structs.replace(query, limit=0, cursor="")
    return scope_digest("search-v1", msgspec.to_builtins(bound))


def decode_search_cursor(query: SearchQuery) -> CursorState | None:
    """Decode and scope-check the request's cursor; no mailbox access is needed for this."""
    if not query.cursor:
        return None
    state = decode_cursor(query.cursor, SEARCH_FORMAT)
    check_scope(state, search_scope(query))
    return state


def literal_limit(session: ImapSession) -> int:
    """Return the largest non-synchronizing literal the server takes (LITERAL+/LITERAL-)."""
    if "LITERAL+" in session.capabilities:
        return 2**31
    if "LITERAL-" in session.capabilities:
        return 4096
    return 0


def imap_date(day: str) -> Arg:
    """Render a YYYY-MM-DD day as an IMAP date (locale-independent month names)."""
    parsed = date.fromisoformat(day)
    return codec.raw(f"{parsed.day}-{_MONTHS[parsed.month - 1]}-{parsed.year}")


def criteria(query: SearchQuery, literal_max: int = 0) -> list[Arg]:
    """Translate the filters into UID SEARCH criteria (without the UID window), ANDed."""
    out: list[Arg] = []

    def text(value: str) -> Arg:
        return codec.string_arg(value, non_sync_literal_max=literal_max)

    def header(name: str, value: str) -> list[Arg]:
        return [codec.atom("HEADER"), codec.atom(name), text(value)]

    if query.query:
        out += [codec.atom("TEXT"), text(query.query)]
    if query.from_:
        out += header("FROM", query.from_)
    if query.to:
        out += header("TO", query.to)
    if query.subject:
        out += header("SUBJECT", query.subject)
    if query.participant:
        value = query.participant
        out += [codec.atom("OR"), codec.atom("OR"), *header("FROM", value)]
        out += [*header("REPLY-TO", value), codec.atom("OR"), *header("TO", value)]
        out += header("CC", value)
    if query.message_id:
        out += [codec.atom("HEADER"), codec.atom("MESSAGE-ID"), text(f"<{query.message_id}>")]
    if query.since:
        out += [codec.atom("SINCE"), imap_date(query.since)]
    if query.before:
        out += [codec.atom("BEFORE"), imap_date(query.before)]
    if query.unread is not None:
        out.append(codec.atom("UNSEEN" if query.unread else "SEEN"))
    if query.flagged is not None:
        out.append(codec.atom("FLAGGED" if query.flagged else "UNFLAGGED"))
    if query.attention:
        out += [codec.atom("OR"), codec.atom("UNSEEN"), codec.atom("FLAGGED")]
    return out


def needs_charset(query: SearchQuery) -> bool:
    """Tell whether any search text is non-ASCII, which requires `CHARSET UTF-8`."""
    texts = (query.query, query.from_, query.to, query.subject, query.participant)
    return not all(t.isascii() for t in texts)


async def search_page(
    session: ImapSession, query: SearchQuery, cursor: CursorState | None
) -> SummaryPage:
    """Run one bounded search window in the query's folder and summarize the page.

    When the window can be planned before the folder is open (a cursor's bound, or the
    UIDNEXT this session saw last time), the UID SEARCH goes out right behind the EXAMINE;
    its answer counts only if the open folder gives the same window, else it is asked again.
    """
    prefix = [codec.raw("CHARSET UTF-8")] if needs_charset(query) else []
    filters = criteria(query, literal_limit(session))
    guess = cursor.upper if cursor else session.last_uid_next.get(query.folder, 0) - 1
    early: list[int] | None = None
    if guess >= 1 and not any("\r\n" in arg for arg in filters):  # no literal to wait for
        planned = plan_window(query.order, guess, cursor)
        selected, early = await session.examine_and_search(
            query.folder, *prefix, *planned.criteria(), *filters
        )
    else:
        selected = await session.examine(query.folder)
    if cursor is not None:
        check_generation(cursor, selected.uid_validity, selected.uid_next)
    ceiling = cursor.upper if cursor else selected.uid_next - 1
    if selected.exists == 0 or ceiling < 1:
        return SummaryPage(
            folder=query.folder,
            uid_validity=selected.uid_validity,
            order=query.order,
            scanned_uids=0,
            messages=[],
        )
    window = plan_window(query.order, ceiling, cursor)
    found = early if early is not None and ceiling == guess else None
    if found is None:
        found = await session.uid_search(*prefix, *window.criteria(), *filters)
    inside = [u for u in found if window.low <= u <= window.high]
    if query.message_id:
        ordered = sorted(set(inside), reverse=query.order == "newest")
        returned, last = await select_verified(
            session,
            ordered,
            query.limit,
            _MESSAGE_ID_FIELD,
            lambda links: _is_exact(links, query.message_id),
            enforce_limits=False,
        )
    else:
        returned, last = take(inside, query.order, query.limit)
    return await summary_page(
        session, query.folder, selected.uid_validity, query.order, window, ceiling,
        (returned, last), (SEARCH_FORMAT, search_scope(query)),
    )  # fmt: skip


def _is_exact(links: LinkSection, wanted: str) -> bool:
    # Exactly one Message-ID field (duplicates are malformed) carrying exactly one ID.
    return links.get("MESSAGE-ID") == [wanted]
