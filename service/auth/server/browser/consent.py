"""/oauth/consent: show a pending request to the signed-in owner, and act on the answer."""

from __future__ import annotations

from typing import Final

import structlog
from aiohttp import web

from schemas.scopes import BASE_SCOPE, SCOPE_ORDER, Scope
from service.auth.server.authorize_request import redirect_with, single_valued
from service.auth.server.errors import OAuthError
from service.auth.server.store import GrantLimitReached, OAuthStore, RegistrationGone
from service.auth.server.store.records import PendingConsent

from .endpoint import BrowserContext, see_other
from .guard import csrf_matches, one, read_form
from .pages import consent_page
from .session import Visit, posting_visit, signed_in

DECISIONS: Final = ("approve", "deny")
log = structlog.get_logger("angelos.oauth")  # the public client_id; never a code or grant ID


def approved_scopes(values: list[str], requested: tuple[Scope, ...]) -> tuple[Scope, ...] | None:
    """The approved scopes in canonical order, or None unless they are distinct, known,
    include mail.read and were all requested."""
    chosen = set(values)
    if len(chosen) != len(values) or BASE_SCOPE not in chosen or not chosen <= set(requested):
        return None
    return tuple(scope for scope in SCOPE_ORDER if scope in chosen)


class ConsentPages:
    """The consent page and its form."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context

    async def show(self, request: web.Request) -> web.StreamResponse:
        """Render the consent page for `?request=<id>` of this signed-in session."""
        store = self.context.store()
        visit = await signed_in(store, request)
        if visit is None:
            return see_other("/oauth/login")
        params = single_valued(request.rel_url.raw_query_string)  # decoded once, not twice
        request_id = None if params is None else params.get("request")
        pending = (
            None
            if request_id is None
            else await store.sessions.peek_consent(request_id, visit.session)
        )
        if request_id is None or pending is None:
            raise OAuthError(400, "unknown_request")
        named = self.context.client_named(pending.request)
        if named is None:
            raise OAuthError(400, "unknown_client")
        return consent_page(
            csrf=visit.csrf,
            request_id=request_id,
            client_name=named[0],
            client_host=named[1],
            redirect_uri=pending.request.redirect_uri,
            scopes=pending.request.scopes,
            mail_from=self.context.config.mail_from,
            self_registered=self.context.self_registered(pending.request.client_id),
        )

    async def decide(self, request: web.Request) -> web.StreamResponse:
        """Approve (grant + code) or deny the pending request; either way back to the client."""
        store = self.context.store()
        visit, request_id, decision, scopes = await self._checked_form(request, store)
        pending = await store.sessions.peek_consent(request_id, visit.session)
        if pending is None:
            raise OAuthError(400, "unknown_request")
        approved = approved_scopes(scopes, pending.request.scopes)
        if decision == "approve" and approved is None:
            raise OAuthError(400, "bad_scope")
        # Consumed before anything is issued: a second submit finds nothing.
        taken = await store.sessions.take_consent(request_id, visit.session)
        if taken is None or taken != pending:
            raise OAuthError(400, "unknown_request")
        if decision == "deny" or approved is None:
            log.info("consent_denied", client_id=taken.request.client_id)
            return see_other(self._answer(taken, [("error", "access_denied")]))
        return await self._approve(store, taken, approved)

    async def _checked_form(
        self, request: web.Request, store: OAuthStore
    ) -> tuple[Visit, str, str, list[str]]:
        visit = await posting_visit(store, request, self.context.config.issuer)
        fields = await read_form(request)
        if not csrf_matches(one(fields, "csrf"), visit.csrf):
            raise OAuthError(403, "bad_csrf")
        if not visit.signed_in:
            raise OAuthError(403, "sign_in_required")
        request_id, decision = one(fields, "request"), one(fields, "decision")
        if (
            request_id is None
            or decision not in DECISIONS
            or set(fields) - {"csrf", "request", "decision", "scope"}
        ):
            raise OAuthError(400, "malformed_form")
        assert decision is not None
        return visit, request_id, decision, fields.get("scope", [])

    async def _approve(
        self, store: OAuthStore, pending: PendingConsent, scopes: tuple[Scope, ...]
    ) -> web.StreamResponse:
        asked = pending.request
        named = self.context.client_named(asked)
        if named is None:
            raise OAuthError(400, "unknown_client")
        registered = self.context.self_registered(asked.client_id)
        try:
            grant_id, grant = await store.grants.create(
                asked.client_id, named[0], scopes, self_registered=registered
            )
        except GrantLimitReached:
            raise OAuthError(409, "too_many_grants") from None
        except RegistrationGone:
            log.info("consent_refused", client_id=asked.client_id, rule="registration_expired")
            raise OAuthError(400, "registration_expired") from None
        code = await store.grants.put_code(
            grant_id, grant, redirect_uri=asked.redirect_uri, code_challenge=asked.code_challenge
        )
        log.info("consent_approved", client_id=asked.client_id, scopes=" ".join(scopes))
        return see_other(self._answer(pending, [("code", code.reveal())]))

    def _answer(self, pending: PendingConsent, params: list[tuple[str, str]]) -> str:
        params.append(("iss", self.context.config.issuer))
        if pending.request.state:
            params.append(("state", pending.request.state))
        return redirect_with(pending.request.redirect_uri, params)
