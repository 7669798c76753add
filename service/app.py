"""Assemble the application context from configuration (no network I/O here)."""

from __future__ import annotations

from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from schemas.secret import Secret
from service.config import Config, MailConfig
from service.context import AppContext
from service.mail_login import mail_tokens
from service.operations import HANDLERS


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
