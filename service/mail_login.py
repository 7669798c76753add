"""How the configured mailbox logs in with OAuth: one shared token source for IMAP and SMTP."""

from __future__ import annotations

from providers.oauth2.cache import tokens_for
from providers.oauth2.profiles import RefreshGrant, google_grant, microsoft_grant
from providers.oauth2.source import TokenSource
from service.config import MailConfig, OAuthLogin


def mail_tokens(mail: MailConfig) -> TokenSource | None:
    """The access-token source of an OAuth login (shared by IMAP and SMTP), or None."""
    if mail.oauth is None:
        return None
    return tokens_for(refresh_grant(mail.oauth), mail.username, mail.timeout_s)


def refresh_grant(login: OAuthLogin) -> RefreshGrant:
    """The provider's refresh grant for a configured OAuth login."""
    if login.issuer == "google":
        assert login.client_secret is not None  # the loader requires it for google
        return google_grant(login.client_id, login.client_secret, login.refresh_token)
    assert login.tenant is not None  # the loader requires it for microsoft
    return microsoft_grant(login.tenant, login.client_id, login.client_secret, login.refresh_token)
