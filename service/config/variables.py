"""Every environment variable angelos reads, each declared once: check-config, the docs and the
loaders all come from this table.

An entry holds the name, the default, secrecy, the typed rule that both checks a value and
writes the rule text, and the meaning; what relations between variables add to a rule text is
beside it in `also`, the relation itself in the loader of its group. The HTTP and OAuth entries
live in variables_oauth.py and are spliced in at their place. docs/configuration.md renders this
table (scripts/config_reference.py rewrites it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from providers.smtp import DEFAULT_MAX_CONNECTIONS
from schemas.scopes import BASE_SCOPE
from service.config._rule import (
    AbsolutePath,
    Choice,
    Custom,
    Duration,
    Host,
    Int,
    Matches,
    Positive,
    ReadableFile,
    RedisUrl,
    Refused,
    Scopes,
    Switch,
    Token,
)
from service.config._rules import has_control, has_cr_lf_nul, is_bare_address, utf8_size, value_of
from service.config._variable import Group, Variable
from service.config.variables_oauth import HTTP_VARIABLES, OAUTH_VARIABLES

GROUPS: Final = (
    Group("loading", "Loading", "Where the variables come from besides the environment."),
    Group("mailbox", "Mailbox", "The one mailbox: provider preset, login, endpoints, limits."),
    Group("gates", "Operator gates", "Each is on only for the exact value `1`, off otherwise."),
    Group(
        "local",
        "Local caller",
        "The caller of `serve --transport stdio` (and the scopes of `--insecure-local-owner`).",
    ),
    Group("http", "HTTP", "The HTTP transport and its OAuth resource-server settings."),
    Group("store", "Ledger store", "Where the send ledger lives and what it requires of Redis."),
    Group(
        "timing",
        "Send timings",
        "Deadlines of one send and of recovery; the defaults fit each other and rarely need a"
        " change.",
    ),
    Group(
        "oauth",
        "First-party authorization server",
        "With `ANGELOS_OAUTH_ENABLED=1` the server is its own single-owner authorization"
        " server (docs/first-party.md): `MCP_OAUTH_ISSUER` must be exactly"
        " `https://<lower-case host>` (no port, path or trailing slash; a port only with"
        " `MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1`), `MCP_RESOURCE_URL` exactly the issuer + `/mcp`,"
        " `MCP_OAUTH_JWKS_URL` exactly the issuer + `/oauth/jwks.json`, `MCP_ALLOWED_SUBJECTS`"
        " one owner subject (no comma), `MAIL_FROM` set explicitly, and a store"
        " (`ANGELOS_REDIS_URL` not `off`). Make keys with `angelos oauth signing-key` and"
        " `angelos oauth bootstrap-token`.",
    ),
    Group(
        "refused",
        "Refused by this release",
        "Read only to refuse them: setting one is a configuration problem.",
    ),
    Group(
        "testing",
        "Test builds",
        "Ignored unless both `ANGELOS_ALLOW_FAULT_INJECTION=1` and `ANGELOS_ENV=test`.",
    ),
    Group("demo", "Demo", "Read by `angelos demo` only."),
)

__all__ = ["BY_NAME", "GROUPS", "VARIABLES", "Group", "Variable", "read"]

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_NO_CR_LF_NUL = Matches(
    lambda v: not has_cr_lf_nul(v), "no CR, LF or NUL", "must not contain CR, LF or NUL"
)
_PINNED_HOST = "; gmail, icloud, yahoo: only their preset"
_GOOGLE = "; only with gmail and `google_oauth2`"
_GOOGLE_EFFECT = "Google OAuth login, which this release refuses"
_MICROSOFT = "; only with `MAIL_PROVIDER=microsoft`"
_MICROSOFT_EFFECT = "Microsoft Graph, which this release refuses"
_REST = Refused("not supported by this version; use ANGELOS_REDIS_URL")
_REST_EFFECT = "the REST store is not supported; use `ANGELOS_REDIS_URL`"


def _local_owner(owner: str) -> bool:
    return not has_control(owner) and owner == owner.strip() and utf8_size(owner) <= 512


VARIABLES: Final = (
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
        Choice(("spacemail", "gmail", "icloud", "yahoo", "microsoft", "custom")),
        "picks the host, port and login presets; `microsoft` is refused by this release",
        unset="spacemail",
    ),
    Variable(
        "MAIL_AUTH_MODE",
        "mailbox",
        Custom(
            "spacemail, custom: `password`; icloud, yahoo: `app_password`; gmail: `app_password`"
            " or `google_oauth2`",
            checked_by="_mailbox._auth_mode",
        ),
        "how angelos logs in; `google_oauth2` is refused by this release, so gmail needs"
        " `app_password`",
        shown="`password` (spacemail, custom), `app_password` (icloud, yahoo), `google_oauth2`"
        " (gmail)",
    ),
    Variable(
        "MAIL_USERNAME",
        "mailbox",
        _NO_CR_LF_NUL,
        "the IMAP and SMTP login",
        shown="required",
        also="; gmail, icloud, yahoo: a complete bare address",
    ),
    Variable(
        "MAIL_PASSWORD",
        "mailbox",
        _NO_CR_LF_NUL,
        "the mailbox password or app password for IMAP and SMTP",
        shown="required",
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
        also="; required when `MAIL_USERNAME` is not an address",
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
        also="; gmail, icloud, yahoo: 993",
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
        shown="`465` (icloud: `587`)",
        also="; gmail, yahoo: 465 or 587; icloud: 587",
    ),
    Variable(
        "SMTP_TLS_MODE",
        "mailbox",
        Choice(("tls", "starttls")),
        "implicit TLS or STARTTLS for SMTP (there is no plaintext mode)",
        shown="`starttls` on port 587, else `tls`",
        also="; port 465 needs `tls`, port 587 `starttls`",
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
    *HTTP_VARIABLES,
    Variable(
        "ANGELOS_REDIS_URL",
        "store",
        RedisUrl(),
        "the ledger's Redis; unset starts an embedded one, `off` disables sending",
        shown="unset (embedded Redis)",
        secret=True,
    ),
    Variable(
        "ANGELOS_DATA_DIR",
        "store",
        AbsolutePath(),
        "where the embedded Redis keeps its AOF, and every server its rollback witness and the "
        "journal of ledger writes it still owes (directories created with mode 0700); keep it "
        "on persistent, writable storage, or sending stays off",
        shown="`$XDG_DATA_HOME/angelos`, else `$HOME/.local/share/angelos`",
    ),
    Variable(
        "XDG_DATA_HOME",
        "store",
        AbsolutePath(lenient=True),
        "places `ANGELOS_DATA_DIR` when that is unset",
        in_env_file=False,
    ),
    Variable(
        "HOME",
        "store",
        AbsolutePath(lenient=True),
        "places `ANGELOS_DATA_DIR` when it and `XDG_DATA_HOME` are unset",
        shown="the account's home directory",
        in_env_file=False,
    ),
    Variable(
        "SEND_LEDGER_NAMESPACE",
        "store",
        Matches(
            re.compile(r"[a-z0-9-]{1,32}", re.ASCII),
            "1-32 of `a-z`, `0-9` and `-`",
            "must be 1-32 characters of a-z, 0-9 and -",
        ),
        "prefix of every ledger key; never reuse or share one",
        unset="angelos",
    ),
    Variable(
        "ANGELOS_LEDGER_HMAC_KEY",
        "store",
        Matches(_HEX64, "64 hex characters"),
        "adds a MAC to every ledger event; audits need the same key",
        secret=True,
    ),
    Variable(
        "SEND_LEDGER_FSYNC",
        "store",
        Choice(("provider_managed",)),
        "`provider_managed` skips the fsync check where the provider forbids `CONFIG GET`",
        shown="unset (`appendfsync always` is checked)",
    ),
    Variable(
        "SEND_LEDGER_ASSUME_NOEVICTION",
        "store",
        Switch(),
        "skips the `maxmemory-policy noeviction` check where `CONFIG GET` is forbidden",
        unset=False,
    ),
    Variable(
        "SEND_LEDGER_WAITAOF_REPLICAS",
        "store",
        Int(0),
        "replicas that must confirm each durable step through `WAITAOF`",
        unset=0,
        also="; above 0 needs `WAITAOF` (Redis 7.2+)",
    ),
    Variable(
        "SEND_LEDGER_FSYNC_TIMEOUT_MS",
        "store",
        Int(100, 10_000),
        "how long one `WAITAOF` may wait",
        unset=2_000,
    ),
    Variable(
        "SEND_LEDGER_RETENTION_S",
        "store",
        Int(604_800, test_low=1),
        "how long a send's ledger stream is kept after its last lifecycle event",
        unset=604_800,
        shown="{} (7 days)",
    ),
    Variable(
        "SEND_TOOL_DEADLINE_S",
        "timing",
        Int(10, 300, test_low=1),
        "how long `mail_send_confirmed` waits before answering `sending`",
        unset=90,
    ),
    Variable(
        "SMTP_DATA_TERMINATION_TIMEOUT_S",
        "timing",
        Int(30, 900, test_low=1),
        "wait for the SMTP server's reply to the end of the message data",
        unset=600,
    ),
    Variable(
        "SEND_DISPATCH_DEADLINE_S",
        "timing",
        Positive(),
        "time from claim to the final reply; the commit point must come before it minus the"
        " termination timeout",
        shown="`5 x MAIL_TIMEOUT + SMTP_DATA_TERMINATION_TIMEOUT_S`, at least 780",
        also=" >= 5 x `MAIL_TIMEOUT` + `SMTP_DATA_TERMINATION_TIMEOUT_S`",
    ),
    Variable(
        "SEND_OUTCOME_PERSIST_WINDOW_S",
        "timing",
        Int(1),
        "how long a dispatch waits for the store to record an outcome before answering with "
        "the persistence warning; the outcome is kept and recorded when the store answers",
        unset=600,
    ),
    Variable(
        "SENT_FILING_TIMEOUT_S",
        "timing",
        Int(5, 120, test_low=1),
        "time allowed to file the Sent copy over IMAP",
        unset=30,
    ),
    Variable(
        "SEND_RECOVERY_GRACE_S",
        "timing",
        Positive(),
        "age after which recovery may close a claim whose process is gone",
        shown="`SEND_DISPATCH_DEADLINE_S + SEND_DISPATCHER_LEASE_MS + 60 s`, at least 900",
        also=" above `SEND_DISPATCH_DEADLINE_S` + the lease + 60 s",
    ),
    Variable(
        "SEND_RECOVERY_INTERVAL_S",
        "timing",
        Int(5, 300, test_low=1),
        "how often each server runs a recovery pass",
        unset=30,
    ),
    Variable(
        "SEND_DISPATCHER_LEASE_MS",
        "timing",
        Int(1_000),
        "liveness lease of a server process; recovery waits for it to lapse, and a dispatch "
        "takes a network step only within two thirds of it after the last confirmed renewal",
        unset=30_000,
    ),
    Variable(
        "SEND_DISPATCHER_LEASE_REFRESH_MS",
        "timing",
        Int(100),
        "how often the lease is renewed",
        unset=10_000,
        also=", at most a third of `SEND_DISPATCHER_LEASE_MS`",
    ),
    Variable(
        "SEND_ANNOTATION_CAP",
        "timing",
        Int(0, 128),
        "most annotations (such as late outcomes) one send's stream accepts",
        unset=32,
    ),
    *OAUTH_VARIABLES,
    Variable("ANGELOS_REDIS_REST_URL", "refused", _REST, _REST_EFFECT),
    Variable("ANGELOS_REDIS_REST_TOKEN", "refused", _REST, _REST_EFFECT, secret=True),
    Variable("GOOGLE_CLIENT_ID", "refused", Token(16384), _GOOGLE_EFFECT, also=_GOOGLE),
    Variable(
        "GOOGLE_CLIENT_SECRET",
        "refused",
        Token(16384),
        _GOOGLE_EFFECT,
        also=_GOOGLE,
        secret=True,
    ),
    Variable(
        "GOOGLE_REFRESH_TOKEN",
        "refused",
        Token(16384),
        _GOOGLE_EFFECT,
        also=_GOOGLE,
        secret=True,
    ),
    Variable(
        "MICROSOFT_CLIENT_ID",
        "refused",
        Matches(re.compile(_UUID), "a UUID"),
        _MICROSOFT_EFFECT,
        also=_MICROSOFT,
    ),
    Variable(
        "MICROSOFT_CLIENT_SECRET",
        "refused",
        Token(16384),
        _MICROSOFT_EFFECT,
        also=_MICROSOFT,
        secret=True,
    ),
    Variable(
        "MICROSOFT_REFRESH_TOKEN",
        "refused",
        Token(16384),
        _MICROSOFT_EFFECT,
        also=_MICROSOFT,
        secret=True,
    ),
    Variable(
        "MICROSOFT_TENANT_ID",
        "refused",
        Matches(re.compile(f"consumers|{_UUID}"), "a tenant UUID or `consumers`"),
        _MICROSOFT_EFFECT,
        also=_MICROSOFT,
    ),
    Variable("MICROSOFT_ACCOUNT_ID", "refused", Token(256), _MICROSOFT_EFFECT, also=_MICROSOFT),
    Variable(
        "MICROSOFT_TOKEN_ENCRYPTION_KEY",
        "refused",
        Matches(_HEX64, "64 hex characters"),
        _MICROSOFT_EFFECT,
        also=_MICROSOFT,
        secret=True,
    ),
    Variable(
        "ANGELOS_ENV",
        "testing",
        Custom(
            "`test` (with `ANGELOS_ALLOW_FAULT_INJECTION=1`) turns test mode on",
            checked_by="_store.test_mode",
        ),
        "test mode: the test variables below apply, lower bounds drop where a rule says so, and"
        " the `SEND_DISPATCH_DEADLINE_S` minimum is not checked",
    ),
    Variable(
        "ANGELOS_ALLOW_FAULT_INJECTION",
        "testing",
        Custom("`1` (with `ANGELOS_ENV=test`) turns test mode on", checked_by="_store.test_mode"),
        "test mode, as above",
        shown="off",
    ),
    Variable(
        "ANGELOS_TEST_PREPARE_TTL_MS",
        "testing",
        Int(1, 900_000),
        "replaces the 15-minute lifetime of a preparation",
        shown="unset (15 minutes)",
    ),
    Variable(
        "ANGELOS_DEMO_SEND",
        "demo",
        Switch(),
        "the demo also prepares and confirms one message",
        unset=False,
        in_env_file=False,
    ),
)

BY_NAME: Final = {variable.name: variable for variable in VARIABLES}


def read(env: Mapping[str, str], name: str, problems: list[str], *, test_mode: bool = False) -> Any:
    """The variable's value by its entry: `unset` when unset or empty, else what its rule parses.

    A value the rule refuses adds "NAME: <rule>" to problems and reads as None.
    """
    variable = BY_NAME[name]
    raw = value_of(env, name)
    if raw is None:
        return variable.unset
    value, problem = variable.check.parse(raw, test_mode)
    if problem is not None:
        problems.append(f"{name}: {problem}")
    return value
