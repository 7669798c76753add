"""How to reach the configured IMAP mailbox: built by the service's config, read by connect."""

from __future__ import annotations

from msgspec import Struct

from providers.oauth2.source import TokenSource
from schemas.secret import Secret


class ImapSettings(Struct, frozen=True):
    """Host, credentials and safety switches of one IMAP mailbox."""

    host: str
    port: int
    username: str
    password: Secret  # unused (may be empty) when `tokens` is set
    ca_file: str | None = None
    allow_private_hosts: bool = False
    timeout_s: float = 30.0
    gmail_config: bool = False  # Gmail preset or a known Gmail IMAP host
    smtp_stores_sent: bool = False  # from configuration only, never inferred from IMAP
    tokens: TokenSource | None = None  # set: log in with SASL XOAUTH2 instead of LOGIN
