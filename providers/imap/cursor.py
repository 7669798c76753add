"""Page cursors and the UID window arithmetic of search paging (pure).

A cursor is base64url (no padding) of a compact JSON array
`[format, uid_validity, bound, upper, scope]`: the exclusive continuation bound, the frozen
upper UID bound of the first page, and a SHA-256 digest of everything the page sequence is
bound to (operation, folder, every filter after defaulting, order; never the limit).

Why no secret key: cursors must survive a restart and work in every process, so they carry no
MAC. The digest plus strict validation of every field is enough, because a forged or edited
cursor can only name a UID window inside the folder's current range (checked against the live
UIDVALIDITY and UIDNEXT) for filters the caller states again in the same request, which is a
window the caller could ask for anyway with a fresh search.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from providers.imap import codec
from providers.imap.codec import Arg
from schemas.errors import InvalidArguments, StaleReference
from schemas.rules import MAX_CURSOR_CHARS
from schemas.search import WINDOW_UIDS, Order

UID_MAX = 4_294_967_295
CursorFormat = Literal["s1", "c1"]  # s1: search and triage; c1: conversation-v1
SEARCH_FORMAT: CursorFormat = "s1"
CONVERSATION_FORMAT: CursorFormat = "c1"

_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_Digest = Annotated[str, Meta(pattern="^[A-Za-z0-9_-]{43}$")]


class CursorState(Struct, array_like=True, frozen=True, forbid_unknown_fields=True):
    """What a cursor carries; `bound` is exclusive in the direction of the order."""

    format: CursorFormat
    uid_validity: Annotated[int, Meta(ge=1, le=UID_MAX)]
    bound: Annotated[int, Meta(ge=2, le=UID_MAX)]
    upper: Annotated[int, Meta(ge=1, le=UID_MAX)]
    scope: _Digest


class Window(Struct, frozen=True):
    """The inclusive UID range one call scans."""

    low: int
    high: int

    @property
    def size(self) -> int:
        """Return how many UID values the window spans (`scanned_uids`)."""
        return self.high - self.low + 1

    def criteria(self) -> list[Arg]:
        """Return the `UID low:high` search criterion restricting a search to this window."""
        return [codec.atom("UID"), codec.raw(f"{self.low}:{self.high}")]


def scope_digest(*parts: object) -> str:
    """Digest the canonical JSON of `parts` (msgspec-encodable) as 43 base64url characters."""
    digest = hashlib.sha256(msgspec.json.encode(list(parts))).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def encode_cursor(state: CursorState) -> str:
    """Render a cursor token (at most 512 characters by construction)."""
    return base64.urlsafe_b64encode(msgspec.json.encode(state)).decode("ascii").rstrip("=")


def _invalid(why: str) -> InvalidArguments:
    return InvalidArguments(f"search.cursor {why}; start a fresh search without a cursor")


def decode_cursor(token: str, format: CursorFormat) -> CursorState:
    """Decode a cursor issued for this kind of operation; anything else is InvalidArguments.

    Only the canonical encoding is accepted, so an edited token cannot pass as another one.
    """
    if len(token) > MAX_CURSOR_CHARS or not _TOKEN.fullmatch(token):
        raise _invalid("is not a cursor this server issued")
    try:
        data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        state = msgspec.json.decode(data, type=CursorState, strict=True)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise _invalid("is not a cursor this server issued") from None
    if encode_cursor(state) != token:
        raise _invalid("is not a cursor this server issued")
    if state.format != format:
        raise _invalid("belongs to another operation")
    if state.bound > state.upper:
        raise _invalid("lies outside its own range")
    return state


def check_scope(state: CursorState, scope: str) -> None:
    """Require the cursor to be bound to exactly this scope digest."""
    if state.scope != scope:
        raise _invalid("was issued for other filters, folder, order or anchor")


def check_generation(state: CursorState, uid_validity: int, uid_next: int) -> None:
    """Require the cursor's folder generation and range to fit the live folder."""
    if state.uid_validity != uid_validity:
        raise StaleReference("the folder changed (UIDVALIDITY); search again without the cursor")
    if state.upper > uid_next - 1:
        raise _invalid("lies outside the folder's UID range")


def plan_window(order: Order, ceiling: int, cursor: CursorState | None) -> Window:
    """Choose the next window of at most 1000 UID values below or above the cursor bound."""
    if order == "newest":
        high = cursor.bound - 1 if cursor else ceiling
        return Window(max(1, high - WINDOW_UIDS + 1), high)
    low = cursor.bound if cursor else 1
    return Window(low, min(ceiling, low + WINDOW_UIDS - 1))


def next_bound(order: Order, window: Window, ceiling: int, last: int | None) -> int | None:
    """Return the continuation bound, or None when the sequence is exhausted.

    `last` is the last returned UID when the page was cut at its limit, else None.
    """
    if order == "newest":
        bound = last if last is not None else window.low
        return bound if bound > 1 else None
    bound = last + 1 if last is not None else window.high + 1
    return bound if bound <= ceiling else None


def take(matches: list[int], order: Order, limit: int) -> tuple[list[int], int | None]:
    """Order matches for the page and cut them at `limit`; also return the cut point or None."""
    ordered = sorted(set(matches), reverse=order == "newest")
    if len(ordered) <= limit:
        return ordered, None
    kept = ordered[:limit]
    return kept, kept[-1]
