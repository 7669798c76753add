"""/oauth/grants (list and revoke the owner's grants) and /oauth/logout."""

from __future__ import annotations

import structlog
from aiohttp import web

from service.auth.server.errors import OAuthError
from service.auth.server.store import OAuthStore

from .endpoint import BrowserContext, see_other
from .guard import csrf_matches, one, read_form
from .pages import grants_page
from .session import Visit, clear_cookie, posting_visit, signed_in

log = structlog.get_logger("angelos.oauth")  # the public client_id; never the grant's handle


class GrantPages:
    """The grants page, revocation and logout."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context

    async def show(self, request: web.Request) -> web.StreamResponse:
        """List the active grants (newest first) and the passkey count."""
        store = self.context.store()
        visit = await signed_in(store, request)
        if visit is None:
            return see_other("/oauth/login")
        grants = await store.grants.list_active()
        owner = await store.owner.load()
        return grants_page(
            csrf=visit.csrf,
            grants=grants,
            passkeys=0 if owner is None else len(owner.credentials),
            mail_from=self.context.config.mail_from,
            self_registered=self.context.self_registered,
        )

    async def revoke(self, request: web.Request) -> web.StreamResponse:
        """Delete the grant posted as `grant=<handle>`; its tokens stop working at once."""
        store = self.context.store()
        visit, handle = await self._form(request, store, "grant")
        if not visit.signed_in:
            raise OAuthError(403, "sign_in_required")
        listed = [e.grant.client_id for e in await store.grants.list_active() if e.handle == handle]
        revoked = await store.grants.revoke(handle)
        log.info("grant_revoked", client_id=listed[0] if listed else None, found=revoked)
        return see_other("/oauth/grants")

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """End the browser session (grants stay) and go to the sign-in page."""
        store = self.context.store()
        visit, _ = await self._form(request, store, None)
        await store.sessions.delete(visit.cookie)
        answer = see_other("/oauth/login")
        clear_cookie(answer)
        return answer

    async def _form(
        self, request: web.Request, store: OAuthStore, field: str | None
    ) -> tuple[Visit, str]:
        visit = await posting_visit(
            store, request, self.context.config.issuer, self.context.visitors
        )
        fields = await read_form(request)
        if not csrf_matches(one(fields, "csrf"), visit.csrf):
            raise OAuthError(403, "bad_csrf")
        expected = {"csrf"} if field is None else {"csrf", field}
        value = "" if field is None else one(fields, field)
        if value is None or set(fields) != expected:
            raise OAuthError(400, "malformed_form")
        return visit, value
