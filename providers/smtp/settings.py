"""How to reach the configured SMTP submission server: built by the service's config."""

from __future__ import annotations

from typing import Literal, get_args

from msgspec import Struct

from providers.oauth2.source import TokenSource
from schemas.secret import Secret
from schemas.submission import SmtpAuth, SmtpEndpoint

TlsMode = Literal["tls", "starttls"]
TLS_MODES = get_args(TlsMode)


class SmtpSettings(Struct, frozen=True):
    """Host, credentials, TLS mode and deadlines of one submission server."""

    host: str
    port: int
    tls_mode: TlsMode  # "tls": implicit TLS from the first byte; "starttls": mandatory upgrade
    username: str
    password: Secret  # unused (may be empty) when `tokens` is set
    ca_file: str | None = None
    allow_private_hosts: bool = False
    timeout_s: float = 30.0  # every step before the end-of-data marker (MAIL_TIMEOUT)
    termination_timeout_s: float = 600.0  # the final reply (RFC 5321 §4.5.3.2.6)
    tokens: TokenSource | None = None  # set: AUTH XOAUTH2 instead of AUTH PLAIN

    @property
    def endpoint(self) -> SmtpEndpoint:
        """The configured destination, as the `smtp_attempt_started` event records it."""
        auth: SmtpAuth = "plain" if self.tokens is None else "xoauth2"
        return SmtpEndpoint(host=self.host, port=self.port, tls_mode=self.tls_mode, auth=auth)
