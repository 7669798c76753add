"""First-party mode's parts of the HTTP service: the authorization server, its own key set and
the online grant check in front of /mcp, all on the issuer's one canonical origin."""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from service.auth.canonical_host import canonical_host_gate
from service.auth.resource.bearer import BearerGate
from service.auth.resource.jwt import TokenRules
from service.auth.resource.key_cache import KeyCache, LocalKeySource
from service.auth.resource.verifier import TokenVerifier
from service.auth.server.client_metadata import metadata_client_id
from service.auth.server.registration import registered_client_id
from service.auth.server.routes import AuthorizationServer, BrowserFlow, StoreSource, oauth_headers
from service.auth.server.send_ledger import SendLedger, SendLedgerSource
from service.auth.server.signing import Signer
from service.auth.server.store import OAuthStore
from service.config import FirstPartyConfig, HttpAuthConfig
from service.context import AppContext


class BrowserFactory(Protocol):
    """Makes the owner's browser flow from the configuration, the OAuth store's source and
    the send ledger's (for the approval page)."""

    def __call__(
        self, config: FirstPartyConfig, store_of: StoreSource, *, ledger_of: SendLedgerSource
    ) -> BrowserFlow:
        """The browser flow."""
        ...


class FirstParty:
    """The authorization server and the bearer gate that trusts only what it issued."""

    def __init__(
        self,
        config: FirstPartyConfig,
        auth: HttpAuthConfig,
        app: AppContext,
        browser: BrowserFactory,
    ) -> None:
        self.config = config
        self.app = app
        self._store: OAuthStore | None = None
        self.clients = frozenset(client.client_id for client in config.clients)
        signer = Signer.of(config)
        self.keys = KeyCache(LocalKeySource(signer.jwks_document()))
        rules = TokenRules(config.issuer, config.resource, frozenset({config.owner}))
        verifier = TokenVerifier(rules, self.keys, grant_check=self.grant_active)
        self.gate = BearerGate(verifier, auth.metadata_url, auth.initial_scopes)
        flow = browser(config, self.store, ledger_of=self.send_ledger)
        self.server = AuthorizationServer(config, signer, self.store, flow)

    def store(self) -> OAuthStore | None:
        """The OAuth state in the ledger's Redis, once the store is open; None fails closed."""
        ledger = self.app.sending.store
        if ledger is None:
            return None
        if self._store is None or self._store.core.client is not ledger.client:
            self._store = OAuthStore(ledger.client, self.config.owner, self.config.resource)
        return self._store

    def send_ledger(self) -> SendLedger | None:
        """The send ledger while sending is usable, with this process's actor; None otherwise."""
        sending = self.app.sending
        if sending.store is None or not sending.usable:
            return None
        return SendLedger(sending.store, f"api:{self.app.instance_id}")

    async def grant_active(
        self, gid: str, client_id: str, subject: str, scopes: tuple[str, ...]
    ) -> bool:
        """The online grant check: the client still configured (or a metadata or self-registered
        client while its switch is on) and the grant still active."""
        store = self.store()
        known = (
            client_id in self.clients
            or metadata_client_id(self.config, client_id)
            or registered_client_id(self.config, client_id)
        )
        if store is None or not known:
            return False
        return await store.grants.grant_active(gid, client_id, subject, scopes)

    def middlewares(self) -> list[Any]:
        """The canonical host gate for every route, then the OAuth headers."""
        return [canonical_host_gate(self.config.issuer), oauth_headers]

    def add_routes(self, web_app: web.Application) -> None:
        """Register the authorization server's routes."""
        self.server.add_routes(web_app)
