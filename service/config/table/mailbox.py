"""The table's entries for loading, the mailbox, the operator gates and the local caller.

The send policy's entries (send_policy.py) are spliced in after the gates, at their place.
"""

from __future__ import annotations

import re
from typing import Final

from providers.smtp import DEFAULT_MAX_CONNECTIONS
from schemas.scopes import BASE_SCOPE
from service.config._values import HEX64, has_control, has_cr_lf_nul, is_bare_address, utf8_size
from service.config.table.entry import Variable
from service.config.table.rules import (
    Choice,
    Custom,
    Duration,
    Host,
    Int,
    Matches,
    ReadableFile,
    Scopes,
    Switch,
    Token,
)
from service.config.table.send_policy import SEND_POLICY_VARIABLES

_NO_CR_LF_NUL = Matches(
    lambda v: not has_cr_lf_nul(v), "no CR, LF or NUL", "must not contain CR, LF or NUL"
)
UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GOOGLE = "; required with gmail and `google_oauth2`, refused otherwise"
_OUTLOOK = "; required with outlook and microsoft, refused otherwise"
_GRAPH = "; required with microsoft, refused otherwise"
_PINNED_HOST = "; gmail, icloud, yahoo, outlook: only their preset; microsoft: unset"


def _local_owner(owner: str) -> bool:
    return not has_control(owner) and owner == owner.strip() and utf8_size(owner) <= 512


MAILBOX_VARIABLES: Final = (
    Variable(
        "ANGELOS_ENV_FILE",
        "loading",
        Custom(
            "path of an env file (see [The env file](#the-env-file)); `--env-file` wins over it",
            checked_by="_env_file.with_env_file",
        ),
        "read that file's `NAME=value` lines; the real environment wins over the file",
        in_env_file=False,
    ),
    Variable(
        "MAIL_PROVIDER",
        "mailbox",
        Choice(("spacemail", "gmail", "icloud", "yahoo", "outlook", "microsoft", "custom")),
        "picks the host, port and login presets (docs/providers.md); `microsoft` is Microsoft"
        " Graph, with no IMAP or SMTP",
        unset="spacemail",
    ),
    Variable(
        "MAIL_AUTH_MODE",
        "mailbox",
        Custom(
            "spacemail, custom: `password`; icloud, yahoo: `app_password`; gmail: `google_oauth2`"
            " or `app_password`; outlook: `microsoft_oauth2`; microsoft: `microsoft_graph`",
            checked_by="_mailbox._auth_mode",
        ),
        "how angelos logs in: a password, or OAuth (XOAUTH2, or Graph) with a refresh token",
        shown="`password` (spacemail, custom), `app_password` (icloud, yahoo), `google_oauth2`"
        " (gmail), `microsoft_oauth2` (outlook), `microsoft_graph` (microsoft)",
    ),
    Variable(
        "MAIL_USERNAME",
        "mailbox",
        _NO_CR_LF_NUL,
        "the IMAP and SMTP login; microsoft: the mailbox's address",
        shown="required",
        also="; gmail, icloud, yahoo, outlook, microsoft: a complete bare address",
    ),
    Variable(
        "MAIL_PASSWORD",
        "mailbox",
        _NO_CR_LF_NUL,
        "the mailbox password or app password for IMAP and SMTP",
        shown="required (unset with OAuth)",
        secret=True,
    ),
    Variable(
        "MAIL_FROM",
        "mailbox",
        Matches(
            is_bare_address,
            "a bare address (no display name)",
            "must be a bare email address (no display name, no CR/LF)",
        ),
        "the only sender address of prepared messages",
        shown="`MAIL_USERNAME`",
        also="; required when `MAIL_USERNAME` is not an address; microsoft: equal to"
        " `MAIL_USERNAME` (case-insensitive)",
    ),
    Variable(
        "MAIL_ALIASES",
        "mailbox",
        Custom(
            "comma-separated bare addresses, at most 50, unique, at most 16 KiB",
            checked_by="_mailbox._aliases",
        ),
        "your other addresses, left out of reply-all recipients; never used as sender",
        shown="none",
        also="; refused with microsoft",
    ),
    Variable(
        "IMAP_HOST",
        "mailbox",
        Host(),
        "the IMAP server (always implicit TLS)",
        shown="provider preset (`custom`: required)",
        also=_PINNED_HOST,
    ),
    Variable(
        "IMAP_PORT",
        "mailbox",
        Int(1, 65535),
        "the IMAP port",
        unset=993,
        also="; gmail, icloud, yahoo, outlook: 993; microsoft: unset or 993",
    ),
    Variable(
        "SMTP_HOST",
        "mailbox",
        Host(),
        "the SMTP submission server",
        shown="provider preset (`custom`: required)",
        also=_PINNED_HOST,
    ),
    Variable(
        "SMTP_PORT",
        "mailbox",
        Int(1, 65535),
        "the SMTP submission port",
        shown="`465` (icloud, outlook: `587`)",
        also="; gmail, yahoo: 465 or 587; icloud, outlook: 587; microsoft: unset or 465",
    ),
    Variable(
        "SMTP_TLS_MODE",
        "mailbox",
        Choice(("tls", "starttls")),
        "implicit TLS or STARTTLS for SMTP (there is no plaintext mode)",
        shown="`starttls` on port 587, else `tls`",
        also="; port 465 needs `tls`, port 587 `starttls`; microsoft: unset or `tls`",
    ),
    Variable(
        "SMTP_MAX_CONNECTIONS",
        "mailbox",
        Int(1, 32),
        "SMTP sessions one server process keeps; further confirms wait their turn",
        unset=DEFAULT_MAX_CONNECTIONS,
    ),
    Variable(
        "MAIL_TIMEOUT",
        "mailbox",
        Duration(1_000, 120_000),
        "network timeout of each IMAP and SMTP step before the end of the message data",
        unset=30_000,
    ),
    Variable(
        "MAIL_TLS_CA_FILE",
        "mailbox",
        ReadableFile(),
        "a PEM bundle of extra trusted CAs for IMAP and SMTP (self-hosted servers)",
        shown="unset (system CAs)",
    ),
    Variable(
        "MAIL_ALLOW_PRIVATE_HOSTS",
        "mailbox",
        Switch(),
        "lets IMAP and SMTP reach loopback and private addresses (refused otherwise)",
        unset=False,
        also="; anything else is off",
    ),
    Variable(
        "GOOGLE_CLIENT_ID",
        "mailbox",
        Token(16384),
        "the OAuth client of your Google Cloud project (`angelos google-auth` uses it too)",
        also=_GOOGLE,
    ),
    Variable(
        "GOOGLE_CLIENT_SECRET",
        "mailbox",
        Token(16384),
        "that client's secret",
        also=_GOOGLE,
        secret=True,
    ),
    Variable(
        "GOOGLE_REFRESH_TOKEN",
        "mailbox",
        Token(16384),
        "the owner's grant for scope `https://mail.google.com/`, from `angelos google-auth`;"
        " exchanged for access tokens at Google's token endpoint",
        also=_GOOGLE,
        secret=True,
    ),
    Variable(
        "MICROSOFT_CLIENT_ID",
        "mailbox",
        Matches(re.compile(UUID), "a UUID"),
        "the application (client) ID of your Microsoft Entra app registration",
        also=_OUTLOOK,
    ),
    Variable(
        "MICROSOFT_CLIENT_SECRET",
        "mailbox",
        Token(16384),
        "that app's client secret; with microsoft it also keys the search cursors' MAC",
        also="; required with microsoft, optional with outlook (unset for a public client),"
        " refused otherwise",
        secret=True,
    ),
    Variable(
        "MICROSOFT_REFRESH_TOKEN",
        "mailbox",
        Token(16384),
        "the owner's grant: from `angelos outlook-auth` (outlook: IMAP and SMTP) or `angelos"
        " microsoft-auth` (microsoft: Graph); microsoft keeps its rotated successors encrypted"
        " in the store",
        also=_OUTLOOK,
        secret=True,
    ),
    Variable(
        "MICROSOFT_TENANT_ID",
        "mailbox",
        Matches(re.compile(f"consumers|{UUID}"), "a tenant UUID or `consumers`"),
        "your Microsoft 365 tenant's UUID, or `consumers` for Outlook.com",
        also=_OUTLOOK,
    ),
    Variable(
        "MICROSOFT_ACCOUNT_ID",
        "mailbox",
        Token(256),
        "microsoft: the `id` of Graph's `/me` for the mailbox owner; every Graph call checks it",
        also=_GRAPH,
    ),
    Variable(
        "MICROSOFT_TOKEN_ENCRYPTION_KEY",
        "mailbox",
        Matches(HEX64, "64 hex characters"),
        "microsoft: the AES-256-GCM key of the stored refresh token; kept outside Redis, never"
        " changed",
        also=_GRAPH,
        secret=True,
    ),
    Variable(
        "MAIL_ENABLE_WRITES",
        "gates",
        Switch(),
        "mailbox changes (folders, copy, move, flags, drafts, trash) for callers with `mail.write`",
        unset=False,
    ),
    Variable(
        "MAIL_ENABLE_SEND",
        "gates",
        Switch(),
        "`mail_prepare` and `mail_send_confirmed` for callers with `mail.send` (needs a store)",
        unset=False,
    ),
    Variable(
        "MAIL_ENABLE_DELETE",
        "gates",
        Switch(),
        "permanent delete of single messages (never on Gmail)",
        unset=False,
        also="; needs `MAIL_ENABLE_WRITES=1` too",
    ),
    *SEND_POLICY_VARIABLES,
    Variable(
        "ANGELOS_LOCAL_OWNER",
        "local",
        Matches(
            _local_owner,
            "at most 512 bytes, no control characters, no surrounding whitespace",
            "must be at most 512 bytes, without control characters or surrounding whitespace",
        ),
        "the stdio caller's name; sends are visible to `send_status` of the same owner only",
        unset="local",
    ),
    Variable(
        "ANGELOS_LOCAL_SCOPES",
        "local",
        Scopes(),
        "what a local caller may do; a gate must also be on for writes and sends",
        unset=(BASE_SCOPE,),
    ),
)
