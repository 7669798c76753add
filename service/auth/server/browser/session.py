"""The browser cookie `__Host-angelos` and the budgets spent per session or source.

The cookie is either a signed-in session (a token naming its record in the store) or an
anonymous visitor (a sealed cookie, nothing stored: visitor.py). Either is a Visit; a visitor's
carries a SessionView made from its cookie (never stored), so the ceremonies bind challenges
and check the CSRF value the same way for both.
"""

from __future__ import annotations

from typing import Final

import msgspec
from aiohttp import web

from schemas.secret import Secret
from service.auth.server.errors import OAuthError
from service.auth.server.store import (
    BROWSER,
    BudgetRule,
    OAuthStore,
    SessionView,
)
from service.auth.server.store.keys import sha256_hex
from service.auth.server.store.records import SessionRecord

from .guard import same_origin
from .visitor import VisitorCookie, VisitorSeal

COOKIE: Final = "__Host-angelos"
RECENT_SIGN_IN_S: Final = 5 * 60  # adding a passkey needs a sign-in this recent


class Visit(msgspec.Struct, frozen=True):
    """The session a request came with (or was given): its cookie value and loaded view."""

    cookie: Secret
    session: SessionView
    fresh: bool = False  # created for this request: the answer must set the cookie
    visitor: VisitorCookie | None = None  # an anonymous visitor: `session` is not stored

    @property
    def csrf(self) -> str:
        """The session's CSRF value (rendered into its pages)."""
        return self.session.record.csrf

    @property
    def signed_in(self) -> bool:
        """Whether the owner signed in on this session."""
        return self.session.record.authenticated


def presented_cookie(request: web.Request) -> Secret | None:
    """The session cookie value the browser sent, if any."""
    value = request.cookies.get(COOKIE)
    return Secret(value) if value else None


def set_cookie(response: web.StreamResponse, cookie: Secret) -> None:
    """Give the browser its session cookie: Secure, HttpOnly, SameSite=Lax, Path=/."""
    response.set_cookie(
        COOKIE, cookie.reveal(), secure=True, httponly=True, samesite="Lax", path="/"
    )


def clear_cookie(response: web.StreamResponse) -> None:
    """Remove the session cookie (with the attributes a __Host- cookie must keep)."""
    response.set_cookie(COOKIE, "", max_age=0, secure=True, httponly=True, samesite="Lax", path="/")


async def spend(store: OAuthStore, rule: BudgetRule, scope: str = "") -> None:
    """Spend one use of a budget; 429 rate_limited when it is exhausted."""
    budget = await store.budgets.spend(rule, scope)
    if not budget.allowed:
        raise OAuthError(429, "rate_limited", budget.retry_after_s)


async def spend_all(store: OAuthStore, spends: list[tuple[BudgetRule, str]]) -> None:
    """Spend one use of each budget, or none; 429 rate_limited when one is exhausted."""
    budget = await store.budgets.spend_all(spends)
    if not budget.allowed:
        raise OAuthError(429, "rate_limited", budget.retry_after_s)


def visitor_visit(cookie: Secret, visitor: VisitorCookie, *, fresh: bool = False) -> Visit:
    """The Visit of an anonymous visitor: a SessionView made from its cookie, never stored."""
    record = SessionRecord(
        v=1,
        lineage="",
        csrf=visitor.csrf,
        created_unix=0,
        authenticated_unix=0,
        expires_unix=visitor.expires_unix,
    )
    return Visit(cookie, SessionView(sha256_hex(visitor.id), record, b""), fresh, visitor)


async def current(
    store: OAuthStore, request: web.Request, visitors: VisitorSeal | None = None
) -> Visit | None:
    """The live session of the request's cookie (a signed-in one is counted and slid), or,
    given the seal, the anonymous visitor its cookie holds."""
    cookie = presented_cookie(request)
    if cookie is None:
        return None
    if visitors is not None:
        visitor = visitors.open(cookie.reveal(), store.core.now())
        if visitor is not None:
            return visitor_visit(cookie, visitor)
    session = await store.sessions.load(cookie)
    if session is None:
        return None
    if session.record.authenticated:
        await spend(store, BROWSER, session.handle)
        if not await store.sessions.touch(session):
            return None
    return Visit(cookie, session)


async def signed_in(store: OAuthStore, request: web.Request) -> Visit | None:
    """The request's session when it is signed in."""
    visit = await current(store, request)
    return visit if visit is not None and visit.signed_in else None


async def posting_visit(
    store: OAuthStore, request: web.Request, issuer: str, visitors: VisitorSeal | None = None
) -> Visit:
    """The session (or, given the seal, the visitor) of a browser POST that passed the
    same-origin check; none is 403."""
    same_origin(request, issuer)
    visit = await current(store, request, visitors)
    if visit is None:
        raise OAuthError(403, "no_session")
    return visit


def seal_visit(visitors: VisitorSeal, visitor: VisitorCookie) -> Visit:
    """A Visit for this visitor whose answer sets its newly sealed cookie; a cookie too long
    for a browser (an oversized request) is 400 request_too_large."""
    sealed = visitors.seal(visitor)
    if sealed is None:
        raise OAuthError(400, "request_too_large")
    return visitor_visit(Secret(sealed), visitor, fresh=True)


def recently_signed_in(visit: Visit, now: int) -> bool:
    """Whether the session signed in within the last five minutes."""
    signed = visit.session.record.authenticated_unix
    return signed > 0 and now - signed <= RECENT_SIGN_IN_S
