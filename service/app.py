"""Assemble the application context from configuration (no network I/O here)."""

from __future__ import annotations

from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from providers.oauth2.cache import tokens_for
from providers.oauth2.profiles import RefreshGrant, google_grant, microsoft_grant
from providers.oauth2.source import TokenSource
from schemas.secret import Secret
from service.config import Config, MailConfig, OAuthLogin
from service.context import AppContext
from service.operations import HANDLERS


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


def imap_settings(mail: MailConfig) -> ImapSettings:
    """Translate the mailbox configuration into the IMAP provider's settings."""
    return ImapSettings(
        host=mail.imap_host,
        port=mail.imap_port,
        username=mail.username,
        password=mail.password if mail.password is not None else Secret(""),
        ca_file=mail.tls_ca_file,
        allow_private_hosts=mail.allow_private_hosts,
        timeout_s=mail.timeout_s,
        gmail_config=mail.gmail_imap,
        smtp_stores_sent=mail.smtp_stores_sent,
        tokens=mail_tokens(mail),
    )


def build_app(config: Config, resource_metadata_url: str | None = None) -> AppContext:
    """Build the context every call shares; an invalid mailbox config leaves no mailbox."""
    mailbox = ImapMailbox(imap_settings(config.mail)) if config.mail is not None else None
    return AppContext(
        config=config,
        gates=config.gates,
        mailbox=mailbox,
        smtp_stores_sent=config.mail is not None and config.mail.smtp_stores_sent,
        handlers=dict(HANDLERS),
        resource_metadata_url=resource_metadata_url,
    )
