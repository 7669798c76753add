"""Message summaries from one batched UID FETCH; headers read with BODY.PEEK."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from providers.imap import codec, responses
from providers.imap.cursor import CursorFormat, CursorState, Window, encode_cursor, next_bound
from providers.imap.fetch import (
    FetchAttrs,
    body_section,
    flags,
    internal_date,
    modseq,
    number,
    parse_fetch,
)
from providers.imap.responses import ImapResponse
from providers.imap.session import ImapSession
from providers.mime.header_block import HEADER_BLOCK_LIMIT, parse_fields
from providers.mime.read.headers import display_value, parse_addresses, parse_date
from providers.off_loop import off_loop
from schemas.errors import ServiceUnavailable
from schemas.mailbox import Reference
from schemas.search import MessageSummary, Order, SummaryPage

MAX_SUBJECT_BYTES = 4096
# Only the fields a summary shows, and at most 64 KiB of them per message: a huge To list
# cannot make one page read more than 100 x 64 KiB.
SUMMARY_HEADERS = f"BODY.PEEK[HEADER.FIELDS (DATE FROM TO SUBJECT)]<0.{HEADER_BLOCK_LIMIT}>"


def fetch_items(session: ImapSession) -> str:
    """Return the parenthesized FETCH items of a summary (MODSEQ only with CONDSTORE)."""
    items = "UID FLAGS INTERNALDATE RFC822.SIZE"
    if "CONDSTORE" in session.capabilities:
        items += " MODSEQ"
    return f"({items} {SUMMARY_HEADERS})"


async def fetch_summaries(
    session: ImapSession, folder: str, uid_validity: int, uids: list[int]
) -> list[MessageSummary]:
    """Summarize the messages `uids` of the examined folder, in the given order.

    Messages expunged meanwhile have no FETCH response and are left out.
    """
    if not uids:
        return []
    response = await session.uid_fetch(uids, codec.raw(fetch_items(session)))
    # A page is up to 100 header sections of 64 KiB: parse it off the event loop.
    return await off_loop(summaries_from, response, folder, uid_validity, uids)


def summaries_from(
    response: ImapResponse, folder: str, uid_validity: int, uids: list[int]
) -> list[MessageSummary]:
    """Summarize the FETCH responses for `uids`, in that order (expunged ones are left out)."""
    merged: dict[int, FetchAttrs] = {}
    for attrs in parse_fetch(response):
        token = attrs.get("UID")
        if isinstance(token, responses.Atom) and token.isdigit():
            # An unsolicited flag update for the same UID may arrive as its own response.
            merged.setdefault(int(token), {}).update(attrs)
    summaries = []
    for uid in uids:
        found = merged.get(uid)
        if found is None or "RFC822.SIZE" not in found:
            continue
        summaries.append(summarize(found, Reference(folder, uid_validity, uid)))
    return summaries


def summarize(attrs: FetchAttrs, reference: Reference) -> MessageSummary:
    """Build one summary from a message's FETCH attributes."""
    section = body_section(attrs, "BODY[")
    if section is None:
        raise ServiceUnavailable("IMAP FETCH lacks the summary header fields")
    fields = parse_fields(section)
    subject = fields.get("Subject")
    sender = fields.get("From")
    recipients = fields.get("To")
    return MessageSummary(
        reference=reference,
        subject=display_value(subject, MAX_SUBJECT_BYTES) if subject is not None else "",
        from_=parse_addresses(sender) if sender is not None else [],
        to=parse_addresses(recipients) if recipients is not None else [],
        date=_summary_date(fields.get("Date"), internal_date(attrs)),
        flags=flags(attrs),
        size_bytes=number(attrs, "RFC822.SIZE"),
        modseq=modseq(attrs),
    )


def _summary_date(header: bytes | None, arrived: datetime | None) -> str:
    parsed = parse_date(header) if header is not None else None
    chosen = parsed or arrived
    if chosen is None:
        raise ServiceUnavailable("IMAP FETCH lacks a valid INTERNALDATE")
    return rfc3339(chosen)


def rfc3339(moment: datetime) -> str:
    """Format an aware datetime as RFC 3339 with seconds, "Z" for a zero offset."""
    offset = moment.utcoffset() or timedelta(0)
    if offset % timedelta(minutes=1):  # RFC 3339 offsets are whole minutes
        moment, offset = moment.astimezone(UTC), timedelta(0)
    text = moment.replace(microsecond=0).isoformat()
    return text.removesuffix("+00:00") + "Z" if offset == timedelta(0) else text


async def summary_page(
    session: ImapSession,
    folder: str,
    uid_validity: int,
    order: Order,
    window: Window,
    ceiling: int,
    found: tuple[list[int], int | None],
    cursor: tuple[CursorFormat, str],
) -> SummaryPage:
    """Summarize the selected UIDs and add the continuation cursor when UIDs remain.

    `found` is (returned UIDs, last UID taken); `cursor` is (cursor format, scope digest).
    """
    returned, last = found
    bound = next_bound(order, window, ceiling, last)
    token = None
    if bound is not None:
        token = encode_cursor(CursorState(cursor[0], uid_validity, bound, ceiling, cursor[1]))
    return SummaryPage(
        folder=folder,
        uid_validity=uid_validity,
        order=order,
        scanned_uids=window.size,
        messages=await fetch_summaries(session, folder, uid_validity, returned),
        next_cursor=token,
    )
