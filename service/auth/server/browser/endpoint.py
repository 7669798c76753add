"""What the browser handlers share: configuration, the store, the clock, and error answers.

A handler raises an OAuthError to refuse; its wrapper (`json_endpoint` or `page_endpoint`) is the
one place that renders it, with the store's trouble as 503 and a 429 with Retry-After.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from service.auth.server.client_metadata import document_host, metadata_client_id
from service.auth.server.errors import RETRY_AFTER, OAuthError
from service.auth.server.registration import registered_client_id
from service.auth.server.store import OAuthStore, StoreError
from service.auth.server.store.records import ConsentRequest
from service.config import Client, FirstPartyConfig

from .pages import error_page
from .passkeys import RelyingParty
from .source import request_source
from .visitor import VisitorSeal

StoreSource = Callable[[], OAuthStore | None]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MESSAGES: Final = {
    "cross_origin": "This request did not come from this site's own pages.",
    "bad_csrf": "This form is out of date. Go back, reload the page and try again.",
    "no_session": "Your session has ended. Start again from the application.",
    "sign_in_required": "Sign in first.",
    "unsupported_media_type": "This request has the wrong content type.",
    "body_too_large": "This request is too large.",
    "request_too_large": "This authorization request is too large to sign in with.",
    "malformed_form": "This form submission is malformed.",
    "malformed_request": "This request is malformed.",
    "unknown_request": "This request is unknown, expired or was already answered.",
    "bad_scope": "The chosen permissions do not match the request.",
    "unknown_client": "This application is no longer configured.",
    "too_many_grants": "Too many applications have access; revoke one first.",
    "registration_expired": (
        "This application's registration expired before you answered. Connect it again."
    ),
    "rate_limited": "Too many requests. Wait a minute and try again.",
    "unavailable": "The sign-in service is unavailable. Try again shortly.",
    "sending_unavailable": "Sending is not available on this server now; nothing was approved.",
}


class BrowserContext:
    """Configuration, store source and clock of the owner's browser flow."""

    def __init__(
        self,
        config: FirstPartyConfig,
        store_of: StoreSource,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store_of = store_of
        self.clock = clock
        self.clients: dict[str, Client] = {c.client_id: c for c in config.clients}
        self.relying_party = RelyingParty(config.issuer, config.owner)
        self.visitors = VisitorSeal(config.signing_key)

    def client_named(self, asked: ConsentRequest) -> tuple[str, str | None] | None:
        """Who asks: the configured client's name, or the name its metadata document gave at
        authorization and the host that document lives on, or the name a self-registered
        client gave itself; None when none of them is allowed now."""
        client = self.clients.get(asked.client_id)
        if client is not None:
            return client.client_name, None
        if asked.client_name and metadata_client_id(self.config, asked.client_id):
            return asked.client_name, document_host(asked.client_id)
        if asked.client_name and self.self_registered(asked.client_id):
            return asked.client_name, None
        return None

    def self_registered(self, client_id: str) -> bool:
        """A client that registered itself (RFC 7591): its name is only what it says."""
        return registered_client_id(self.config, client_id)

    def source(self, request: web.Request) -> str:
        """The source address an anonymous request's budgets are kept by."""
        return request_source(request, self.config.trusted_proxies)

    def store(self) -> OAuthStore:
        """The store; none configured or reachable right now is 503."""
        store = self.store_of()
        if store is None:
            raise OAuthError(503, "unavailable")
        return store

    def now(self) -> int:
        """The clock in whole unix seconds."""
        return int(self.clock())


def _json(refusal: OAuthError) -> web.Response:
    """A refusal as the JSON passkey endpoints answer it."""
    return web.json_response({"error": refusal.error}, status=refusal.status)


def _page(refusal: OAuthError) -> web.Response:
    """A refusal as a short page."""
    return error_page(refusal.status, MESSAGES.get(refusal.error, "This request was refused."))


def _endpoint(handler: Handler, render: Callable[[OAuthError], web.Response]) -> Handler:
    """Render the handler's refusal, store trouble as 503 and a 429 with Retry-After."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except OAuthError as refused:
            refusal = refused
        except StoreError:
            refusal = OAuthError(503, "unavailable")
        answer = render(refusal)
        if refusal.status == 429:
            answer.headers["Retry-After"] = RETRY_AFTER
        return answer

    return wrapped


def json_endpoint(handler: Handler) -> Handler:
    """The refusals of a JSON endpoint, as JSON."""
    return _endpoint(handler, _json)


def page_endpoint(handler: Handler) -> Handler:
    """The refusals of a page, as pages."""
    return _endpoint(handler, _page)


def see_other(location: str) -> web.Response:
    """A 303 to `location` (returned, so the OAuth headers are added to it)."""
    return web.Response(status=303, headers={"Location": location})
