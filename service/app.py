"""Assemble the application context from configuration (no network I/O here)."""

from __future__ import annotations

from ledger.store.connection import StoreClient
from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from providers.mailbox import Mailbox
from schemas.secret import Secret
from service.config import Config, MailConfig
from service.context import AppContext
from service.graph_mailbox import AttachedLater, attach_token_store, build_graph_mailbox
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


def command_mailbox(mail: MailConfig, client: StoreClient) -> Mailbox:
    """The mailbox a ledger command reads: IMAP on one connection, or Graph with its token
    store on the ledger's Redis (`client`)."""
    if mail.provider == "microsoft":
        mailbox, token_store = build_graph_mailbox(mail)
        attach_token_store(token_store, client, mail)
        return mailbox
    return ImapMailbox(imap_settings(mail), pool_size=1)


def build_app(config: Config, resource_metadata_url: str | None = None) -> AppContext:
    """Build the context every call shares; an invalid mailbox config leaves no mailbox."""
    mailbox: Mailbox | None = None
    token_store: AttachedLater | None = None
    if config.mail is not None and config.mail.provider == "microsoft":
        mailbox, token_store = build_graph_mailbox(config.mail)
    elif config.mail is not None:
        mailbox = ImapMailbox(imap_settings(config.mail))
    return AppContext(
        config=config,
        gates=config.gates,
        mailbox=mailbox,
        graph_token_store=token_store,
        smtp_stores_sent=config.mail is not None and config.mail.smtp_stores_sent,
        handlers=dict(HANDLERS),
        resource_metadata_url=resource_metadata_url,
    )
