"""Graph search cursors: the continuation Graph gave, bound to the search by an HMAC.

A cursor is base64url (no padding) of the compact JSON array `[format, name, value, scope,
mac]`: the paging parameter of Graph's `@odata.nextLink` (`$skip` or `$skiptoken`) and its
value, a SHA-256 digest of everything the page sequence is bound to (operation, folder, every
filter after defaulting, order; never the limit), and an HMAC-SHA256 over the rest keyed by the
configured client secret. Only the parameter is carried, not the whole link, so cursors stay
within the 512-character limit; the next request is rebuilt from the search itself.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Annotated, Final, Literal
from urllib.parse import parse_qsl, urlsplit

import msgspec
from msgspec import Meta, Struct, structs

from schemas.errors import InvalidArguments, ServiceUnavailable
from schemas.rules import MAX_CURSOR_CHARS
from schemas.search import SearchQuery
from schemas.secret import Secret

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
