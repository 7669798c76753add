"""How the configured mailbox logs in with OAuth: one shared token source for IMAP and SMTP, or,
for `microsoft`, one for Graph whose rotated refresh tokens live in the store."""

from __future__ import annotations

from ledger.store.connection import StoreClient
from providers.oauth2.cache import rotating_tokens_for, tokens_for
from providers.oauth2.profiles import RefreshGrant, google_grant, graph_grant, microsoft_grant
from providers.oauth2.rotation import RotationStore
from providers.oauth2.source import TokenSource
from service.config import GraphAccount, MailConfig, OAuthLogin
from service.graph_tokens import RedisRefreshTokenStore, refresh_token_store


def mail_tokens(mail: MailConfig) -> TokenSource | None:
    """The access-token source of an OAuth login (shared by IMAP and SMTP), or None."""
    if mail.graph is not None:
        # Graph's grant and scopes are not an IMAP or SMTP login: never hand them to either.
        raise ValueError("microsoft has no IMAP or SMTP login; Graph takes graph_tokens")
    if mail.oauth is None:
        return None
    return tokens_for(refresh_grant(mail.oauth), mail.username, mail.timeout_s)


def refresh_grant(login: OAuthLogin) -> RefreshGrant:
    """The provider's refresh grant for a configured IMAP/SMTP OAuth login."""
    if login.issuer == "google":
        assert login.client_secret is not None  # the loader requires it for google
        return google_grant(login.client_id, login.client_secret, login.refresh_token)
    assert login.tenant is not None  # the loader requires it for microsoft
    return microsoft_grant(login.tenant, login.client_id, login.client_secret, login.refresh_token)


def graph_token_store(client: StoreClient, mail: MailConfig) -> RedisRefreshTokenStore:
    """The encrypted store of a `microsoft` mailbox's rotated refresh tokens, on `client`."""
    login, graph = _graph_login(mail)
    assert login.tenant is not None  # _graph_login checked it
    return refresh_token_store(
        client,
        login.tenant,
        login.client_id,
        graph.account_id,
        mail.from_addr,
        login.refresh_token,
        graph.token_key,
        timeout_s=mail.timeout_s,
    )


def graph_tokens(mail: MailConfig, rotation: RotationStore) -> TokenSource:
    """The Graph access-token source of a `microsoft` mailbox, keeping rotations in `rotation`.

    One per process for the grant, account, sender, key and store object (single flight).
    """
    login, graph = _graph_login(mail)
    assert login.tenant is not None and login.client_secret is not None  # checked there
    grant = graph_grant(login.tenant, login.client_id, login.client_secret, login.refresh_token)
    binding = (graph.account_id, mail.from_addr, graph.token_key)
    return rotating_tokens_for(grant, binding, rotation, mail.timeout_s)


def _graph_login(mail: MailConfig) -> tuple[OAuthLogin, GraphAccount]:
    login, graph = mail.oauth, mail.graph
    if login is None or graph is None or login.tenant is None or login.client_secret is None:
        raise ValueError("a Graph token source needs a microsoft mailbox (MAIL_PROVIDER=microsoft)")
    return login, graph
