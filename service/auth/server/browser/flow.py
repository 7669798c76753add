"""OwnerBrowser: the owner's side of the authorization server, as a BrowserFlow."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from service.auth.server.authorize_request import AuthorizeRequest
from service.auth.server.errors import AuthorizeError
from service.auth.server.routes import by_method
from service.auth.server.send_ledger import SendLedgerSource, no_send_ledger
from service.auth.server.store import AUTHORIZE, OAuthStore
from service.auth.server.store.records import ConsentRequest
from service.config import FirstPartyConfig

from .approval import APPROVE_ROUTE, ApprovalPages
from .ceremonies import Ceremonies
from .consent import ConsentPages
from .endpoint import BrowserContext, Handler, StoreSource, json_endpoint, page_endpoint, see_other
from .grant_pages import GrantPages
from .pages import LoginMode, login_page, refusal_page
from .session import Visit, current, seal_visit, set_cookie, spend
from .static import ASSETS, AssetFiles


class OwnerBrowser(BrowserContext):
    """Sign-in, passkeys, consent, grants, logout and send approval for the one mailbox owner.

    `ledger_of` is the send ledger the approval page reads and writes (None: not available)."""

    def __init__(
        self,
        config: FirstPartyConfig,
        store_of: StoreSource,
        clock: Callable[[], float] = time.time,
        *,
        ledger_of: SendLedgerSource = no_send_ledger,
    ) -> None:
        super().__init__(config, store_of, clock)
        self.ceremonies = Ceremonies(self)
        self.consent = ConsentPages(self)
        self.grants = GrantPages(self)
        self.approvals = ApprovalPages(self, ledger_of, self._sign_in_to)
        self.assets = AssetFiles()

    async def authorize(self, request: web.Request, valid: AuthorizeRequest) -> web.StreamResponse:
        """Signed in, keep the validated request as the session's pending consent and go on to
        consent; otherwise sign in here (the page is rendered at the authorize URL), the request
        sealed in the visitor's cookie and nothing stored."""
        return await page_endpoint(lambda r: self._authorize(r, valid))(request)

    def refused(self, refusal: AuthorizeError) -> web.StreamResponse:
        """The page an authorization request that cannot go back to its client gets."""
        return refusal_page(refusal.status, refusal.rule)

    async def _authorize(self, request: web.Request, valid: AuthorizeRequest) -> web.StreamResponse:
        store = self.store()
        asked = ConsentRequest(
            client_id=valid.client_id,
            redirect_uri=valid.redirect_uri,
            scopes=valid.scopes,
            state=valid.state,
            code_challenge=valid.code_challenge,
            client_name="" if valid.client_id in self.clients else valid.client_name,
        )
        visit = await current(store, request, self.visitors)
        if visit is None or not visit.signed_in:  # nothing is stored: the request rides along
            return await self._sign_in_page(store, visit, asked)
        await spend(store, AUTHORIZE, visit.session.handle)
        request_id = await store.sessions.put_consent(visit.cookie, visit.session, asked)
        if request_id is None:  # the session changed meanwhile: once more with the new record
            reloaded = await store.sessions.load(visit.cookie)
            if reloaded is not None:
                visit = Visit(visit.cookie, reloaded, visit.fresh)
                request_id = await store.sessions.put_consent(visit.cookie, visit.session, asked)
        if request_id is None:
            return see_other("/oauth/login")
        return see_other(f"/oauth/consent?request={request_id.reveal()}")

    async def login(self, request: web.Request) -> web.StreamResponse:
        """The sign-in page (or first-passkey enrolment); signed in, the grants page."""
        store = self.store()
        visit = await current(store, request, self.visitors)
        if visit is not None and visit.signed_in:
            return see_other("/oauth/grants")
        kept = None if visit is None or visit.visitor is None else visit.visitor.pending
        return await self._sign_in_page(store, visit, kept)

    async def _sign_in_to(
        self, store: OAuthStore, visit: Visit | None, next_path: str
    ) -> web.StreamResponse:
        """The sign-in page rendered at an owner page's URL, going back to it once signed in
        (a visitor's pending request is kept)."""
        kept = None if visit is None or visit.visitor is None else visit.visitor.pending
        return await self._sign_in_page(store, visit, kept, next_path)

    async def _sign_in_page(
        self,
        store: OAuthStore,
        visit: Visit | None,
        pending: ConsentRequest | None,
        next_path: str | None = None,
    ) -> web.StreamResponse:
        """The sign-in page for an anonymous visitor, its cookie (re)sealed with the pending
        request for ten more minutes; nothing is stored for it. Signed in, the page goes on to
        `next_path` when given, else where the sign-in answer says."""
        now = self.now()
        if visit is None or visit.visitor is None:  # none yet (or a session from before)
            visitor = self.visitors.fresh(now, pending)
        else:
            visitor = self.visitors.renewed(visit.visitor, now, pending)
        sealed = seal_visit(self.visitors, visitor)
        mode = await self._login_mode(store)
        answer = login_page(mode, sealed.csrf, self.config.mail_from, next_path)
        set_cookie(answer, sealed.cookie)
        return answer

    async def _login_mode(self, store: OAuthStore) -> LoginMode:
        if await store.owner.load() is None and not await store.owner.bootstrap_disabled():
            return "enrol"
        return "sign-in"

    def add_routes(self, app: web.Application) -> None:
        """Register the browser routes (login, passkeys, consent, grants, logout, approval,
        assets)."""
        page, ceremony = page_endpoint, json_endpoint
        approvals = self.approvals
        routes: dict[str, dict[str, Handler]] = {
            "/oauth/login": {"GET": page(self.login)},
            "/oauth/passkeys/register/begin": {"POST": ceremony(self.ceremonies.register_begin)},
            "/oauth/passkeys/register/finish": {"POST": ceremony(self.ceremonies.register_finish)},
            "/oauth/passkeys/login/begin": {"POST": ceremony(self.ceremonies.login_begin)},
            "/oauth/passkeys/login/finish": {"POST": ceremony(self.ceremonies.login_finish)},
            "/oauth/consent": {"GET": page(self.consent.show), "POST": page(self.consent.decide)},
            "/oauth/grants": {"GET": page(self.grants.show), "POST": page(self.grants.revoke)},
            "/oauth/logout": {"POST": page(self.grants.logout)},
            APPROVE_ROUTE: {"GET": page(approvals.show), "POST": ceremony(approvals.finish)},
            f"{APPROVE_ROUTE}/begin": {"POST": ceremony(approvals.begin)},
            f"{APPROVE_ROUTE}/decline": {"POST": page(approvals.decline)},
        }
        for name in ASSETS:
            routes[f"/oauth/assets/{name}"] = {"GET": self.assets.serve}
        for path, methods in routes.items():
            app.router.add_route("*", path, by_method(methods))
