"""Every environment variable angelos reads: the one table behind check-config and the docs.

The HTTP and OAuth entries live in variables_oauth.py and are spliced in at their place.

docs/configuration.md renders this table (scripts/config_reference.py rewrites it) and a test
holds the two, and the loaders' actual reads, to each other.
"""

from __future__ import annotations

from typing import Final

from service.config._variable import SCOPES_RULE, TOKEN_RULE, Group, Variable
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

__all__ = ["BY_NAME", "GROUPS", "VARIABLES", "Group", "Variable"]

VARIABLES: Final = (
    Variable(
        "ANGELOS_ENV_FILE",
        "loading",
        "unset",
        "path of an env file (see [The env file](#the-env-file)); `--env-file` wins over it",
        "read that file's `NAME=value` lines; the real environment wins over the file",
        in_env_file=False,
    ),
    Variable(
        "MAIL_PROVIDER",
        "mailbox",
        "`spacemail`",
        "`spacemail`, `gmail`, `icloud`, `yahoo`, `microsoft` or `custom`",
        "picks the host, port and login presets; `microsoft` is refused by this release",
    ),
    Variable(
        "MAIL_AUTH_MODE",
        "mailbox",
        "`password` (spacemail, custom), `app_password` (icloud, yahoo), `google_oauth2` (gmail)",
        "spacemail, custom: `password`; icloud, yahoo: `app_password`; gmail: `app_password`"
        " or `google_oauth2`",
        "how angelos logs in; `google_oauth2` is refused by this release, so gmail needs"
        " `app_password`",
    ),
    Variable(
        "MAIL_USERNAME",
        "mailbox",
        "required",
        "no CR, LF or NUL; gmail, icloud, yahoo: a complete bare address",
        "the IMAP and SMTP login",
    ),
    Variable(
        "MAIL_PASSWORD",
        "mailbox",
        "required",
        "no CR, LF or NUL",
        "the mailbox password or app password for IMAP and SMTP",
        secret=True,
    ),
    Variable(
        "MAIL_FROM",
        "mailbox",
        "`MAIL_USERNAME`",
        "a bare address (no display name); required when `MAIL_USERNAME` is not an address",
        "the only sender address of prepared messages",
    ),
    Variable(
        "MAIL_ALIASES",
        "mailbox",
        "none",
        "comma-separated bare addresses, at most 50, unique, at most 16 KiB",
        "your other addresses, left out of reply-all recipients; never used as sender",
    ),
    Variable(
        "IMAP_HOST",
        "mailbox",
        "provider preset (`custom`: required)",
        "a DNS host name, not an IP literal; gmail, icloud, yahoo: only their preset",
        "the IMAP server (always implicit TLS)",
    ),
    Variable(
        "IMAP_PORT",
        "mailbox",
        "`993`",
        "1-65535; gmail, icloud, yahoo: 993",
        "the IMAP port",
    ),
    Variable(
        "SMTP_HOST",
        "mailbox",
        "provider preset (`custom`: required)",
        "a DNS host name, not an IP literal; gmail, icloud, yahoo: only their preset",
        "the SMTP submission server",
    ),
    Variable(
        "SMTP_PORT",
        "mailbox",
        "`465` (icloud: `587`)",
        "1-65535; gmail, yahoo: 465 or 587; icloud: 587",
        "the SMTP submission port",
    ),
    Variable(
        "SMTP_TLS_MODE",
        "mailbox",
        "`starttls` on port 587, else `tls`",
        "`tls` or `starttls`; port 465 needs `tls`, port 587 `starttls`",
        "implicit TLS or STARTTLS for SMTP (there is no plaintext mode)",
    ),
    Variable(
        "SMTP_MAX_CONNECTIONS",
        "mailbox",
        "`4`",
        "1-32",
        "SMTP sessions one server process keeps; further confirms wait their turn",
    ),
    Variable(
        "MAIL_TIMEOUT",
        "mailbox",
        "`30s`",
        "a duration such as `30s`, `2m` or `1m30s`, from 1 s to 2 min",
        "network timeout of each IMAP and SMTP step before the end of the message data",
    ),
    Variable(
        "MAIL_TLS_CA_FILE",
        "mailbox",
        "unset (system CAs)",
        "an existing readable file",
        "a PEM bundle of extra trusted CAs for IMAP and SMTP (self-hosted servers)",
    ),
    Variable(
        "MAIL_ALLOW_PRIVATE_HOSTS",
        "mailbox",
        "off",
        "`1` is on; anything else is off",
        "lets IMAP and SMTP reach loopback and private addresses (refused otherwise)",
    ),
    Variable(
        "MAIL_ENABLE_WRITES",
        "gates",
        "off",
        "`1` is on",
        "mailbox changes (folders, copy, move, flags, drafts, trash) for callers with `mail.write`",
    ),
    Variable(
        "MAIL_ENABLE_SEND",
        "gates",
        "off",
        "`1` is on",
        "`mail_prepare` and `mail_send_confirmed` for callers with `mail.send` (needs a store)",
    ),
    Variable(
        "MAIL_ENABLE_DELETE",
        "gates",
        "off",
        "`1` is on; needs `MAIL_ENABLE_WRITES=1` too",
        "permanent delete of single messages (never on Gmail)",
    ),
    Variable(
        "ANGELOS_LOCAL_OWNER",
        "local",
        "`local`",
        "at most 512 bytes, no control characters, no surrounding whitespace",
        "the stdio caller's name; sends are visible to `send_status` of the same owner only",
    ),
    Variable(
        "ANGELOS_LOCAL_SCOPES",
        "local",
        "`mail.read`",
        SCOPES_RULE,
        "what a local caller may do; a gate must also be on for writes and sends",
    ),
    *HTTP_VARIABLES,
    Variable(
        "ANGELOS_REDIS_URL",
        "store",
        "unset (embedded Redis)",
        "`redis://` on loopback, `rediss://` elsewhere, no query; or `off`",
        "the ledger's Redis; unset starts an embedded one, `off` disables sending",
        secret=True,
    ),
    Variable(
        "ANGELOS_DATA_DIR",
        "store",
        "`$XDG_DATA_HOME/angelos`, else `$HOME/.local/share/angelos`",
        "an absolute path without control characters",
        "where the embedded Redis keeps its AOF, and every server its rollback witness and the "
        "journal of ledger writes it still owes (directories created with mode 0700); keep it "
        "on persistent, writable storage, or sending stays off",
    ),
    Variable(
        "XDG_DATA_HOME",
        "store",
        "unset",
        "an absolute path; anything else is ignored",
        "places `ANGELOS_DATA_DIR` when that is unset",
        in_env_file=False,
    ),
    Variable(
        "HOME",
        "store",
        "the account's home directory",
        "an absolute path; anything else is ignored",
        "places `ANGELOS_DATA_DIR` when it and `XDG_DATA_HOME` are unset",
        in_env_file=False,
    ),
    Variable(
        "SEND_LEDGER_NAMESPACE",
        "store",
        "`angelos`",
        "1-32 of `a-z`, `0-9` and `-`",
        "prefix of every ledger key; never reuse or share one",
    ),
    Variable(
        "ANGELOS_LEDGER_HMAC_KEY",
        "store",
        "unset",
        "64 hex characters",
        "adds a MAC to every ledger event; audits need the same key",
        secret=True,
    ),
    Variable(
        "SEND_LEDGER_FSYNC",
        "store",
        "unset (`appendfsync always` is checked)",
        "unset or `provider_managed`",
        "`provider_managed` skips the fsync check where the provider forbids `CONFIG GET`",
    ),
    Variable(
        "SEND_LEDGER_ASSUME_NOEVICTION",
        "store",
        "off",
        "`1` is on",
        "skips the `maxmemory-policy noeviction` check where `CONFIG GET` is forbidden",
    ),
    Variable(
        "SEND_LEDGER_WAITAOF_REPLICAS",
        "store",
        "`0`",
        "an integer >= 0; above 0 needs `WAITAOF` (Redis 7.2+)",
        "replicas that must confirm each durable step through `WAITAOF`",
    ),
    Variable(
        "SEND_LEDGER_FSYNC_TIMEOUT_MS",
        "store",
        "`2000`",
        "100-10000",
        "how long one `WAITAOF` may wait",
    ),
    Variable(
        "SEND_LEDGER_RETENTION_S",
        "store",
        "`604800` (7 days)",
        "an integer >= 604800",
        "how long a send's ledger stream is kept after its last lifecycle event",
    ),
    Variable(
        "SEND_TOOL_DEADLINE_S",
        "timing",
        "`90`",
        "10-300",
        "how long `mail_send_confirmed` waits before answering `sending`",
    ),
    Variable(
        "SMTP_DATA_TERMINATION_TIMEOUT_S",
        "timing",
        "`600`",
        "30-900",
        "wait for the SMTP server's reply to the end of the message data",
    ),
    Variable(
        "SEND_DISPATCH_DEADLINE_S",
        "timing",
        "`5 x MAIL_TIMEOUT + SMTP_DATA_TERMINATION_TIMEOUT_S`, at least 780",
        "a positive integer >= 5 x `MAIL_TIMEOUT` + `SMTP_DATA_TERMINATION_TIMEOUT_S`",
        "time from claim to the final reply; the commit point must come before it minus the"
        " termination timeout",
    ),
    Variable(
        "SEND_OUTCOME_PERSIST_WINDOW_S",
        "timing",
        "`600`",
        "an integer >= 1",
        "how long a dispatch waits for the store to record an outcome before answering with "
        "the persistence warning; the outcome is kept and recorded when the store answers",
    ),
    Variable(
        "SENT_FILING_TIMEOUT_S",
        "timing",
        "`30`",
        "5-120",
        "time allowed to file the Sent copy over IMAP",
    ),
    Variable(
        "SEND_RECOVERY_GRACE_S",
        "timing",
        "`SEND_DISPATCH_DEADLINE_S + SEND_DISPATCHER_LEASE_MS + 60 s`, at least 900",
        "a positive integer above `SEND_DISPATCH_DEADLINE_S` + the lease + 60 s",
        "age after which recovery may close a claim whose process is gone",
    ),
    Variable(
        "SEND_RECOVERY_INTERVAL_S",
        "timing",
        "`30`",
        "5-300",
        "how often each server runs a recovery pass",
    ),
    Variable(
        "SEND_DISPATCHER_LEASE_MS",
        "timing",
        "`30000`",
        "an integer >= 1000",
        "liveness lease of a server process; recovery waits for it to lapse, and a dispatch "
        "takes a network step only within two thirds of it after the last confirmed renewal",
    ),
    Variable(
        "SEND_DISPATCHER_LEASE_REFRESH_MS",
        "timing",
        "`10000`",
        "an integer >= 100, at most a third of `SEND_DISPATCHER_LEASE_MS`",
        "how often the lease is renewed",
    ),
    Variable(
        "SEND_ANNOTATION_CAP",
        "timing",
        "`32`",
        "0-128",
        "most annotations (such as late outcomes) one send's stream accepts",
    ),
    *OAUTH_VARIABLES,
    Variable(
        "ANGELOS_REDIS_REST_URL",
        "refused",
        "unset",
        "any value is refused",
        "the REST store is not supported; use `ANGELOS_REDIS_URL`",
    ),
    Variable(
        "ANGELOS_REDIS_REST_TOKEN",
        "refused",
        "unset",
        "any value is refused",
        "the REST store is not supported; use `ANGELOS_REDIS_URL`",
        secret=True,
    ),
    Variable(
        "GOOGLE_CLIENT_ID",
        "refused",
        "unset",
        TOKEN_RULE + "; only with gmail and `google_oauth2`",
        "Google OAuth login, which this release refuses",
    ),
    Variable(
        "GOOGLE_CLIENT_SECRET",
        "refused",
        "unset",
        TOKEN_RULE + "; only with gmail and `google_oauth2`",
        "Google OAuth login, which this release refuses",
        secret=True,
    ),
    Variable(
        "GOOGLE_REFRESH_TOKEN",
        "refused",
        "unset",
        TOKEN_RULE + "; only with gmail and `google_oauth2`",
        "Google OAuth login, which this release refuses",
        secret=True,
    ),
    Variable(
        "MICROSOFT_CLIENT_ID",
        "refused",
        "unset",
        "a UUID; only with `MAIL_PROVIDER=microsoft`",
        "Microsoft Graph, which this release refuses",
    ),
    Variable(
        "MICROSOFT_CLIENT_SECRET",
        "refused",
        "unset",
        TOKEN_RULE + "; only with `MAIL_PROVIDER=microsoft`",
        "Microsoft Graph, which this release refuses",
        secret=True,
    ),
    Variable(
        "MICROSOFT_REFRESH_TOKEN",
        "refused",
        "unset",
        TOKEN_RULE + "; only with `MAIL_PROVIDER=microsoft`",
        "Microsoft Graph, which this release refuses",
        secret=True,
    ),
    Variable(
        "MICROSOFT_TENANT_ID",
        "refused",
        "unset",
        "a tenant UUID or `consumers`; only with `MAIL_PROVIDER=microsoft`",
        "Microsoft Graph, which this release refuses",
    ),
    Variable(
        "MICROSOFT_ACCOUNT_ID",
        "refused",
        "unset",
        "1-256 characters, no whitespace; only with `MAIL_PROVIDER=microsoft`",
        "Microsoft Graph, which this release refuses",
    ),
    Variable(
        "MICROSOFT_TOKEN_ENCRYPTION_KEY",
        "refused",
        "unset",
        "64 hex characters; only with `MAIL_PROVIDER=microsoft`",
        "Microsoft Graph, which this release refuses",
        secret=True,
    ),
    Variable(
        "ANGELOS_ENV",
        "testing",
        "unset",
        "`test` (with `ANGELOS_ALLOW_FAULT_INJECTION=1`) turns test mode on",
        "test mode: the test variables below apply and timing lower bounds drop to 1",
    ),
    Variable(
        "ANGELOS_ALLOW_FAULT_INJECTION",
        "testing",
        "off",
        "`1` (with `ANGELOS_ENV=test`) turns test mode on",
        "test mode, as above",
    ),
    Variable(
        "ANGELOS_TEST_PREPARE_TTL_MS",
        "testing",
        "unset (15 minutes)",
        "1-900000",
        "replaces the 15-minute lifetime of a preparation",
    ),
    Variable(
        "ANGELOS_DEMO_SEND",
        "demo",
        "off",
        "`1` is on",
        "the demo also prepares and confirms one message",
        in_env_file=False,
    ),
)

BY_NAME: Final = {variable.name: variable for variable in VARIABLES}
