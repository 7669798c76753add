"""Search and triage over Graph: one page of a folder by received date per call.

Graph filters what it can index (dates, read state, the follow-up flag, the exact Message-ID);
the text filters (from, to, subject, participant) are literal, case-insensitive matches on the
page's summaries, and a text `query` also reads each candidate's MIME (bounded, and never
marking it read). A page may therefore hold fewer matches than the limit and still have a
cursor: the window is Graph's page, not the match count.

Cursors carry the continuation Graph gave, bound to the search by an HMAC.

A cursor is base64url (no padding) of the compact JSON array `[format, name, value, scope,
mac]`: the paging parameter of Graph's `@odata.nextLink` (`$skip` or `$skiptoken`) and its
value, a SHA-256 digest of everything the page sequence is bound to (operation, folder, every
filter after defaulting, order; never the limit), and an HMAC-SHA256 over the rest keyed by the
configured client secret. Only the parameter is carried, not the whole link, so cursors stay
within the 512-character limit; the next request is rebuilt from the search itself.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
from typing import Annotated, Final, Literal
from urllib.parse import parse_qsl, urlsplit

import msgspec
from msgspec import Meta, Struct, structs

from providers.graph.account import PROVIDER, GraphSettings
from providers.graph.answers import get, read_body
from providers.graph.folders import CAPABILITY_WARNING, folder_path
from providers.graph.http import ME, GraphHttp
from providers.graph.summaries import summary_of
from providers.graph.wire import Message, MessagePage, decode
from providers.mime.read.parse import parse_message
from providers.off_loop import off_loop
from schemas.errors import InvalidArguments, ServiceUnavailable
from schemas.rules import MAX_CURSOR_CHARS
from schemas.search import SearchQuery, SummaryPage
from schemas.secret import Secret

MAX_PAGE: Final = 25
TEXT_READ_BYTES: Final = 1024 * 1024  # of each candidate's MIME a text query reads
SUMMARY_FIELDS: Final = (
    "id,parentFolderId,internetMessageId,subject,from,toRecipients,ccRecipients,replyTo,"
    "receivedDateTime,sentDateTime,isRead,isDraft,flag,hasAttachments"
)
_EPOCH: Final = "1900-01-01T00:00:00Z"


# --- cursors ------------------------------------------------------------------------------------

FORMAT: Final = "g1"
_Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
_Value = Annotated[str, Meta(min_length=1, max_length=300, pattern="^[A-Za-z0-9._~%!-]+$")]
FOREIGN: Final = "the cursor does not belong to this search; start again without it"


class GraphCursor(Struct, array_like=True, frozen=True, forbid_unknown_fields=True):
    """What a Graph cursor carries."""

    format: Literal["g1"]
    name: Literal["$skip", "$skiptoken"]
    value: _Value
    scope: _Hex64
    mac: _Hex64


def search_scope(query: SearchQuery) -> str:
    """The digest of what a page sequence is bound to (the query without cursor and limit)."""
    return hashlib.sha256(
        msgspec.json.encode(structs.replace(query, cursor="", limit=0))
    ).hexdigest()


def _mac(key: Secret, name: str, value: str, scope: str) -> str:
    message = "\x00".join((FORMAT, name, value, scope)).encode("ascii")
    return hmac.new(key.reveal().encode(), message, hashlib.sha256).hexdigest()


def continuation(next_link: str | None, collection: str) -> tuple[str, str] | None:
    """The paging parameter of a next link that pages `collection`, or None at the end."""
    if next_link is None:
        return None
    parts = urlsplit(next_link)
    if f"{parts.scheme}://{parts.netloc}{parts.path}" != collection:
        raise ServiceUnavailable("Microsoft Graph's next page link leaves the collection")
    found = [(k, v) for k, v in parse_qsl(parts.query) if k in ("$skip", "$skiptoken")]
    if len(found) != 1:
        raise ServiceUnavailable("Microsoft Graph's next page link has no single paging value")
    return found[0]


def encode_cursor(key: Secret, query: SearchQuery, name: str, value: str) -> str:
    """The cursor for the page after this one."""
    scope = search_scope(query)
    state = [FORMAT, name, value, scope, _mac(key, name, value, scope)]
    text = base64.urlsafe_b64encode(msgspec.json.encode(state)).rstrip(b"=").decode("ascii")
    if len(text) > MAX_CURSOR_CHARS:
        raise ServiceUnavailable("Microsoft Graph's paging token is too long for a cursor")
    return text


def decode_cursor(key: Secret, query: SearchQuery) -> GraphCursor | None:
    """Check the query's cursor (before any request): None without one; a foreign one refused."""
    if not query.cursor:
        return None
    text = query.cursor
    try:
        blob = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        state = msgspec.json.decode(blob, type=GraphCursor)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise InvalidArguments(FOREIGN) from None
    expected = _mac(key, state.name, state.value, state.scope)
    if not hmac.compare_digest(expected, state.mac) or state.scope != search_scope(query):
        raise InvalidArguments(FOREIGN)
    return state


# --- pages --------------------------------------------------------------------------------------


def odata_string(value: str) -> str:
    """An OData string literal: single quotes, a quote inside doubled."""
    return "'" + value.replace("'", "''") + "'"


def server_filter(query: SearchQuery) -> str:
    """The $filter Graph applies; the ordered property comes first, as Graph requires."""
    parts: list[str] = []
    if query.before:
        parts.append(f"receivedDateTime lt {query.before}T00:00:00Z")
    if query.unread is not None:
        parts.append(f"isRead eq {'false' if query.unread else 'true'}")
    if query.flagged is not None:
        parts.append(f"flag/flagStatus {'eq' if query.flagged else 'ne'} 'flagged'")
    if query.attention:
        parts.append("(isRead eq false or flag/flagStatus eq 'flagged')")
    if query.message_id:
        parts.append(f"internetMessageId eq {odata_string('<' + query.message_id + '>')}")
    if query.since or parts:
        # With $orderby, Graph refuses a $filter that does not start with the ordered property.
        parts.insert(
            0, f"receivedDateTime ge {query.since + 'T00:00:00Z' if query.since else _EPOCH}"
        )
    return " and ".join(parts)


def page_params(query: SearchQuery) -> dict[str, str]:
    """The query parameters of the first page (a later page adds Graph's paging value)."""
    params = {
        "$top": str(min(query.limit, MAX_PAGE)),
        "$select": SUMMARY_FIELDS,
        "$orderby": f"receivedDateTime {'asc' if query.order == 'oldest' else 'desc'}",
    }
    found = server_filter(query)
    if found:
        params["$filter"] = found
    return params


def _contains(needle: str, *haystack: str | None) -> bool:
    folded = needle.casefold()
    return any(folded in (text or "").casefold() for text in haystack)


def _mailboxes(message: Message, *, participants: bool) -> list[str | None]:
    recipients = list(message.to_recipients)
    if participants:
        recipients += message.cc_recipients + message.reply_to
        if message.from_ is not None:
            recipients.append(message.from_)
    return [text for r in recipients for text in (r.email_address.name, r.email_address.address)]


def header_match(query: SearchQuery, message: Message) -> bool:
    """Tell whether a message passes the literal text filters that need no body."""
    sender = message.from_.email_address if message.from_ is not None else None
    if query.from_ and not _contains(
        query.from_, *(() if sender is None else (sender.name, sender.address))
    ):
        return False
    if query.to and not _contains(query.to, *_mailboxes(message, participants=False)):
        return False
    if query.subject and not _contains(query.subject, message.subject):
        return False
    if query.participant and not _contains(
        query.participant, *_mailboxes(message, participants=True)
    ):
        return False
    return not query.message_id or message.internet_message_id == f"<{query.message_id}>"


async def text_match(http: GraphHttp, query: SearchQuery, message: Message) -> bool:
    """Tell whether the message's subject, addresses or text contain the query (bounded read)."""
    if _contains(query.query, message.subject, *_mailboxes(message, participants=True)):
        return True
    answer = await get(http, f"{ME}/messages/{message.id}/$value", limit=TEXT_READ_BYTES)
    if answer.status != 200:
        read_body(answer)  # raises what the failure means
    parsed = await off_loop(parse_message, answer.body)
    return _contains(query.query, parsed.text)


async def search_page(http: GraphHttp, settings: GraphSettings, query: SearchQuery) -> SummaryPage:
    """Run one page of a search or triage (the cursor is checked before any request)."""
    cursor = decode_cursor(settings.cursor_key, query)
    folder = "inbox" if query.folder.upper() == "INBOX" else query.folder
    collection = f"{folder_path(folder)}/messages"
    params = page_params(query)
    if cursor is not None:
        params[cursor.name] = cursor.value
    page = decode(read_body(await get(http, collection, params)), MessagePage)
    candidates = [m for m in page.value if header_match(query, m)]
    if query.query:
        kept = await asyncio.gather(*(text_match(http, query, m) for m in candidates))
        candidates = [m for m, keep in zip(candidates, kept, strict=True) if keep]
    following = continuation(page.next_link, collection)
    next_cursor = None
    if following is not None:
        next_cursor = encode_cursor(settings.cursor_key, query, *following)
    return SummaryPage(
        folder=query.folder,
        uid_validity=0,
        order=query.order,
        scanned_uids=0,
        messages=[summary_of(m, settings.account_id) for m in candidates],
        next_cursor=next_cursor,
        provider=PROVIDER,
        warnings=[CAPABILITY_WARNING],
    )
