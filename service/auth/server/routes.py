"""The authorization server's machine endpoints: metadata, key set, authorize and token.

The owner's browser steps (sign-in, passkeys, consent, grants) belong to a BrowserFlow; this
module validates an authorization request and hands it over, and serves the token endpoint.
Every answer here carries the no-store, no-referrer, no-frame headers; OAuth errors are always
`{"error": "<code>"}`, rendered by `oauth_error`, except a refused authorization request: a
redirect when its client and redirect URI are known, otherwise the browser's page for the owner.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import structlog
from aiohttp import web

from schemas.scopes import SCOPE_ORDER
from service.auth.server.authorize_request import (
    MAX_QUERY_BYTES,
    AuthorizeRequest,
    RegisteredClient,
    refusal_location,
    single_valued,
    validate_authorize,
)
from service.auth.server.client_metadata import (
    MetadataClient,
    looks_like_metadata_url,
    metadata_client_id,
    metadata_url_problem,
)
from service.auth.server.errors import RETRY_AFTER, AuthorizeError, OAuthError
from service.auth.server.metadata_resolver import (
    ClientMetadataResolver,
    ClientMetadataUnavailable,
)
from service.auth.server.registration import MAX_BODY_BYTES as MAX_REGISTRATION_BYTES
from service.auth.server.registration import (
    RegistrationRefused,
    check_registration,
    new_client_id,
    registered_client_id,
    uri_kinds,
)
from service.auth.server.signing import Signer
from service.auth.server.store import (
    CLIENT_METADATA_FETCH,
    CLIENT_METADATA_SOURCE,
    REGISTRATION,
    REGISTRATION_SOURCE,
    OAuthStore,
    RegistrationsFull,
)
from service.auth.server.store.errors import StoreError
from service.auth.server.token_request import (
    MAX_BODY_BYTES,
    CodeExchange,
    validate_token_request,
)
from service.auth.server.token_service import (
    Issuer,
    TokenResponse,
    exchange_code,
    refresh_tokens,
)
from service.config import FirstPartyConfig

log = structlog.get_logger("angelos.oauth")
OAUTH_HEADERS: Final = {
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
}
METADATA_PATH: Final = "/.well-known/oauth-authorization-server"
REGISTER_PATH: Final = "/oauth/register"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
StoreSource = Callable[[], OAuthStore | None]


class BrowserFlow(Protocol):
    """The owner's side: what a valid authorization request turns into in the browser."""

    async def authorize(self, request: web.Request, valid: AuthorizeRequest) -> web.StreamResponse:
        """Sign in (rendered at this URL) or go on to consent."""
        ...

    def source(self, request: web.Request) -> str:
        """The source address an anonymous request's budgets are kept by."""
        ...

    def refused(self, refusal: AuthorizeError) -> web.StreamResponse:
        """The page for a refused request that cannot be redirected, naming its failed check."""
        ...

    def add_routes(self, app: web.Application) -> None:
        """Register the browser routes (login, passkeys, consent, grants, logout, assets)."""
        ...


def oauth_error(refusal: OAuthError, headers: Mapping[str, str] | None = None) -> web.Response:
    """An OAuth JSON error, nothing but its code (a 429 also says when to come back)."""
    if refusal.status == 429:
        headers = {**(headers or {}), "Retry-After": RETRY_AFTER}
    return web.json_response({"error": refusal.error}, status=refusal.status, headers=headers)


def by_method(methods: Mapping[str, Handler]) -> Handler:
    """The one method guard of the /oauth routes, the browser's included: dispatch on the method
    (HEAD as GET), answer any other with 405, `Allow` and invalid_request, and answer an
    OAuthError the handler raises with `oauth_error`."""
    allow = ", ".join(methods)

    async def dispatch(request: web.Request) -> web.StreamResponse:
        method = "GET" if request.method == "HEAD" else request.method
        handler = methods.get(method)
        if handler is None:
            return oauth_error(OAuthError(405, "invalid_request"), {"Allow": allow})
        try:
            return await handler(request)
        except OAuthError as refusal:
            return oauth_error(refusal)

    return dispatch


@web.middleware
async def oauth_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Give every /oauth and metadata answer its headers (a page may set a wider CSP first)."""
    response = await handler(request)
    if request.path.startswith("/oauth/") or request.path == METADATA_PATH:
        for name, value in OAUTH_HEADERS.items():
            response.headers.setdefault(name, value)
    return response


class AuthorizationServer:
    """One owner's authorization server under the MCP origin."""

    def __init__(
        self,
        config: FirstPartyConfig,
        signer: Signer,
        store_of: StoreSource,
        browser: BrowserFlow,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.signer = signer
        self.store_of = store_of
        self.browser = browser
        self.clock = clock
        self.clients: dict[str, RegisteredClient] = {c.client_id: c for c in config.clients}
        self.cimd: ClientMetadataResolver | None = None
        if config.cimd_enabled:
            # Only authorization fetches; token redemption uses the identity bound then.
            self.cimd = ClientMetadataResolver(
                ca_file=config.ca_file, allow_private_hosts=config.allow_private_hosts
            )
        self.who = Issuer(config.issuer, config.resource, config.owner)

    async def _spend_fetch_budget(self, source: str) -> bool:
        store = self.store_of()
        if store is None:
            raise ClientMetadataUnavailable(503, "client_metadata_unavailable")
        spends = [(CLIENT_METADATA_SOURCE, source), (CLIENT_METADATA_FETCH, "")]
        try:
            return (await store.budgets.spend_all(spends)).allowed
        except StoreError:
            raise ClientMetadataUnavailable(503, "client_metadata_unavailable") from None

    async def _metadata_client(self, request: web.Request, client_id: str) -> MetadataClient:
        """The client an https client_id's metadata document describes, or AuthorizeError."""
        if self.cimd is None:
            raise AuthorizeError("invalid_client", rule="client_metadata_disabled")
        private = self.config.allow_private_hosts
        if metadata_url_problem(client_id, allow_private_hosts=private) is not None:
            raise AuthorizeError("invalid_client", rule="client_metadata_url")
        source = self.browser.source(request)
        try:
            return await self.cimd.resolve(client_id, lambda: self._spend_fetch_budget(source))
        except ClientMetadataUnavailable as unavailable:
            rule, status = unavailable.rule, unavailable.status
        raise AuthorizeError("invalid_client", rule=rule, status=status)

    async def aclose(self) -> None:
        """Close the client-metadata fetcher's connections."""
        if self.cimd is not None:
            await self.cimd.aclose()

    def metadata(self) -> dict[str, Any]:
        """The RFC 8414 document (a registration endpoint only when registration is on)."""
        issuer = self.config.issuer
        registration = (
            {"registration_endpoint": f"{issuer}{REGISTER_PATH}"}
            if self.config.registration_enabled
            else {}
        )
        return {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/oauth/authorize",
            "token_endpoint": f"{issuer}/oauth/token",
            "jwks_uri": f"{issuer}/oauth/jwks.json",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": list(SCOPE_ORDER),
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": self.config.cimd_enabled,
            **registration,
        }

    def add_routes(self, app: web.Application) -> None:
        """Register every route of the authorization server, the browser's included."""
        app.router.add_route("*", METADATA_PATH, by_method({"GET": self._metadata}))
        app.router.add_route("*", "/oauth/jwks.json", by_method({"GET": self._jwks}))
        app.router.add_route("*", "/oauth/authorize", by_method({"GET": self._authorize}))
        app.router.add_route("*", "/oauth/token", by_method({"POST": self._token}))
        if self.config.registration_enabled:  # otherwise the path is 404, like any other
            app.router.add_route("*", REGISTER_PATH, by_method({"POST": self._register}))
        self.browser.add_routes(app)

    async def _metadata(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.metadata())

    async def _jwks(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=self.signer.jwks_document(), content_type="application/json")

    async def _authorize(self, request: web.Request) -> web.StreamResponse:
        # The raw query, decoded once by the validator: aiohttp's query_string is decoded
        # already, and a second decoding would let a doubly encoded redirect URI match.
        query = request.rel_url.raw_query_string
        try:
            clients = await self._clients_for(request, query)
            valid = validate_authorize(query, clients, self.config.resource)
        except AuthorizeError as refusal:
            location = refusal_location(refusal, self.config.issuer)
            if location is None:  # never redirect to a destination not yet validated
                # The check's name only: the query's values may be anything a visitor sent.
                log.warning("authorize_refused", rule=refusal.rule, error=refusal.error)
                page = self.browser.refused(refusal)
                if refusal.status == 429:
                    page.headers["Retry-After"] = RETRY_AFTER
                return page
            # Back to the client's validated callback; logged at info, as a client's own mistake.
            log.info("authorize_refused", rule=refusal.rule, error=refusal.error, redirected=True)
            raise web.HTTPSeeOther(location) from None
        return await self.browser.authorize(request, valid)

    async def _clients_for(
        self, request: web.Request, query: str
    ) -> Mapping[str, RegisteredClient]:
        """The configured clients, or the one whose metadata document the client_id names."""
        client_id = _client_id(query) if len(query.encode()) <= MAX_QUERY_BYTES else None
        if client_id is None or client_id in self.clients:
            return self.clients
        if registered_client_id(self.config, client_id):
            return {client_id: await self._registered_client(client_id)}
        if not looks_like_metadata_url(client_id):
            return self.clients  # the validator names it an unknown client
        return {client_id: await self._metadata_client(request, client_id)}

    async def _registered_client(self, client_id: str) -> RegisteredClient:
        """A self-registered client from the store, or AuthorizeError (unknown or expired)."""
        store = self.store_of()
        try:
            client = None if store is None else await store.registrations.get(client_id)
        except StoreError:
            client = None
            store = None
        if store is None:
            raise AuthorizeError("invalid_client", rule="registration_unavailable", status=503)
        if client is None:
            raise AuthorizeError("invalid_client", rule="registration_unknown")
        return client

    async def _register(self, request: web.Request) -> web.StreamResponse:
        """RFC 7591: register a public client for the pending lifetime; 201 with its ID."""
        store = self.store_of()
        if store is None:
            raise OAuthError(503, "temporarily_unavailable")
        body = await request.content.read(MAX_REGISTRATION_BYTES + 1)
        source = self.browser.source(request)
        try:
            budget = await store.budgets.spend_all(
                [(REGISTRATION_SOURCE, source), (REGISTRATION, "")]
            )
        except StoreError:
            raise OAuthError(503, "temporarily_unavailable") from None
        if not budget.allowed:
            log.warning("registration_refused", rule="registration_budget")
            raise OAuthError(429, "temporarily_unavailable")
        content_type = request.headers.get("Content-Type", "")
        try:
            client = check_registration(body, content_type, new_client_id(), int(self.clock()))
        except RegistrationRefused as refused:
            log.info("registration_refused", rule=refused.rule)
            answer = {"error": refused.error, "error_description": refused.description}
            return web.json_response(answer, status=400)
        try:
            await store.registrations.add(client)
        except RegistrationsFull:
            log.warning("registration_refused", rule="registrations_pending_full")
            raise OAuthError(429, "temporarily_unavailable") from None
        except StoreError:
            raise OAuthError(503, "temporarily_unavailable") from None
        # The client ID is public; the callbacks only by kind (they may name a user's machine).
        log.info(
            "client_registered", client_id=client.client_id, redirect_uri_kinds=uri_kinds(client)
        )
        return web.json_response(client.answer(), status=201)

    async def _token(self, request: web.Request) -> web.StreamResponse:
        body = await request.content.read(MAX_BODY_BYTES + 1)
        try:
            verdict = validate_token_request(
                query=request.query_string,
                has_authorization="Authorization" in request.headers,
                content_type=request.headers.get("Content-Type", ""),
                body=body,
                clients=self.clients,
                resource=self.config.resource,
                bound=lambda client_id: (
                    metadata_client_id(self.config, client_id)
                    or registered_client_id(self.config, client_id)
                ),
            )
        except OAuthError as refused:
            log.info("token_refused", status=refused.status, error=refused.error)
            raise
        store = self.store_of()
        if store is None:
            raise OAuthError(503, "temporarily_unavailable")
        now = int(self.clock())
        grant_type = type(verdict).__struct_config__.tag  # the union's tag: the grant_type read
        try:
            if isinstance(verdict, CodeExchange):
                answer = await exchange_code(
                    store.grants, store.refresh, self.signer, self.who, verdict, now
                )
            else:
                answer = await refresh_tokens(store.refresh, self.signer, self.who, verdict, now)
        except OAuthError as refused:
            log.info(
                "token_refused", grant_type=grant_type, status=refused.status, error=refused.error
            )
            raise
        # Client IDs are configuration, not secrets; tokens never appear here.
        log.info("token_issued", grant_type=grant_type, client_id=verdict.client_id)
        return _token_answer(answer)


def _client_id(query: str) -> str | None:
    params = single_valued(query)
    return None if params is None else params.get("client_id")


def _token_answer(answer: TokenResponse) -> web.Response:
    body = {
        "access_token": answer.access_token,
        "token_type": answer.token_type,
        "expires_in": answer.expires_in,
        "refresh_token": answer.refresh_token,
        "scope": answer.scope,
    }
    return web.Response(text=json.dumps(body), content_type="application/json")
