"""OwnerBrowser: the owner's side of the authorization server, as a BrowserFlow."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from service.auth.server.authorize_request import AuthorizeRequest
from service.auth.server.errors import AuthorizeError
from service.auth.server.routes import by_method
from service.auth.server.store import AUTHORIZE, OAuthStore
from service.auth.server.store.records import ConsentRequest
from service.config import FirstPartyConfig

from .ceremonies import Ceremonies
from .consent import ConsentPages
from .endpoint import BrowserContext, Handler, StoreSource, json_endpoint, page_endpoint, see_other
from .grant_pages import GrantPages
from .pages import LoginMode, login_page, refusal_page
from .session import Visit, current, current_or_new, set_cookie, spend
from .static import ASSETS, AssetFiles


class OwnerBrowser(BrowserContext):
    """Sign-in, passkeys, consent, grants and logout for the one mailbox owner."""

    def __init__(
        self,
        config: FirstPartyConfig,
        store_of: StoreSource,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(config, store_of, clock)
        self.ceremonies = Ceremonies(self)
        self.consent = ConsentPages(self)
        self.grants = GrantPages(self)
        self.assets = AssetFiles()

    async def authorize(self, request: web.Request, valid: AuthorizeRequest) -> web.StreamResponse:
        """Keep the validated request as this session's pending consent, then sign in here
        (the page is rendered at the authorize URL) or go on to consent."""
        return await page_endpoint(lambda r: self._authorize(r, valid))(request)

    def refused(self, refusal: AuthorizeError) -> web.StreamResponse:
        """The page an authorization request that cannot go back to its client gets."""
        return refusal_page(refusal.status, refusal.rule)

    async def _authorize(self, request: web.Request, valid: AuthorizeRequest) -> web.StreamResponse:
        store = self.store()
        visit = await current_or_new(store, request)
        await spend(store, AUTHORIZE, visit.session.handle)
        asked = ConsentRequest(
            client_id=valid.client_id,
            redirect_uri=valid.redirect_uri,
            scopes=valid.scopes,
            state=valid.state,
            code_challenge=valid.code_challenge,
        )
        request_id = await store.sessions.put_consent(visit.cookie, visit.session, asked)
        if request_id is None:  # the session changed meanwhile: once more with the new record
            reloaded = await store.sessions.load(visit.cookie)
            if reloaded is not None:
                visit = Visit(visit.cookie, reloaded, visit.fresh)
                request_id = await store.sessions.put_consent(visit.cookie, visit.session, asked)
        if request_id is None:
            answer = see_other("/oauth/login")
        elif visit.signed_in:
            answer = see_other(f"/oauth/consent?request={request_id.reveal()}")
        else:
            answer = login_page(await self._login_mode(store), visit.csrf, self.config.mail_from)
        if visit.fresh:
            set_cookie(answer, visit.cookie)
        return answer

    async def login(self, request: web.Request) -> web.StreamResponse:
        """The sign-in page (or first-passkey enrolment); signed in, the grants page."""
        store = self.store()
        signed = await current(store, request)
        if signed is not None and signed.signed_in:
            return see_other("/oauth/grants")
        visit = signed or await current_or_new(store, request)
        answer = login_page(await self._login_mode(store), visit.csrf, self.config.mail_from)
        if visit.fresh:
            set_cookie(answer, visit.cookie)
        return answer

    async def _login_mode(self, store: OAuthStore) -> LoginMode:
        if await store.owner.load() is None and not await store.owner.bootstrap_disabled():
            return "enrol"
        return "sign-in"

    def add_routes(self, app: web.Application) -> None:
        """Register the browser routes (login, passkeys, consent, grants, logout, assets)."""
        page, ceremony = page_endpoint, json_endpoint
        routes: dict[str, dict[str, Handler]] = {
            "/oauth/login": {"GET": page(self.login)},
            "/oauth/passkeys/register/begin": {"POST": ceremony(self.ceremonies.register_begin)},
            "/oauth/passkeys/register/finish": {"POST": ceremony(self.ceremonies.register_finish)},
            "/oauth/passkeys/login/begin": {"POST": ceremony(self.ceremonies.login_begin)},
            "/oauth/passkeys/login/finish": {"POST": ceremony(self.ceremonies.login_finish)},
            "/oauth/consent": {"GET": page(self.consent.show), "POST": page(self.consent.decide)},
            "/oauth/grants": {"GET": page(self.grants.show), "POST": page(self.grants.revoke)},
            "/oauth/logout": {"POST": page(self.grants.logout)},
        }
        for name in ASSETS:
            routes[f"/oauth/assets/{name}"] = {"GET": self.assets.serve}
        for path, methods in routes.items():
            app.router.add_route("*", path, by_method(methods))
