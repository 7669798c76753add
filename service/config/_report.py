"""The effective configuration by documented variable name, for `angelos check-config`."""

from __future__ import annotations

from typing import Final

from schemas.secret import Secret
from schemas.send_policy import SendPolicy
from service.config._model import (
    Config,
    FirstPartyConfig,
    HttpAuthConfig,
    MailConfig,
    StoreConfig,
)
from service.config._urls import parse_redis_url
from service.config.table.variables import GROUPS, VARIABLES, Variable

INVALID: Final = "invalid (see Problems)"
UNRESOLVED: Final = "not resolved (see Problems)"
_MAIL_OAUTH = tuple(v.name for v in VARIABLES if v.name.startswith(("GOOGLE_", "MICROSOFT_")))
_MCP = tuple(v.name for v in VARIABLES if v.name.startswith("MCP_"))


def describe(config: Config) -> dict[str, object]:
    """Map every documented variable to its effective value; secrets only as set/unset.

    A variable named by a problem is "invalid"; one whose group failed for another variable's
    problem is "not resolved".
    """
    known = {
        **_always(config),
        **_send_policy(config.send_policy),
        **_mail(config.mail or config.mail_shown, valid=config.mail is not None),
        **_store(config.store),
        **_http(config),
        **_local(config),
        **_first_party(config),
    }
    named = {problem.split(":", 1)[0] for problem in config.problems}
    return {
        v.name: INVALID if v.name in named else _shown(v, known.get(v.name, UNRESOLVED))
        for v in VARIABLES
    }


def _shown(variable: Variable, value: object) -> object:
    """A secret entry's held credential (or its absence) shows only as set or unset."""
    if variable.secret and (value is None or isinstance(value, Secret)):
        return "unset" if value is None else "set"
    return value


def _switch(on: bool) -> str:
    return "on" if on else "off"


def _always(config: Config) -> dict[str, object]:
    """Values every loaded Config knows, whatever else failed."""
    return {
        "ANGELOS_ENV_FILE": None if config.env_file is None else config.env_file.path,
        "MAIL_ENABLE_WRITES": _switch(config.gates.writes),
        "MAIL_ENABLE_SEND": _switch(config.gates.send),
        "MAIL_ENABLE_DELETE": _switch(config.gates.delete),
        "PORT": config.port,
        "ANGELOS_OAUTH_ENABLED": _switch(config.first_party_enabled),
        "ANGELOS_DEMO_SEND": _switch(config.demo_send),
    }


def _send_policy(policy: SendPolicy) -> dict[str, object]:
    """The send policy; the allowlist only by its size (its entries are personal data)."""
    allowlist = policy.allowlist
    count = 0 if allowlist is None else len(allowlist.entries)
    return {
        "ANGELOS_SEND_APPROVAL": policy.approval,
        "MAIL_SEND_ALLOWED_RECIPIENTS": None
        if allowlist is None
        else f"set ({count} {'entry' if count == 1 else 'entries'}, not shown)",
        "MAIL_SEND_RATE_LIMIT": None if policy.rate is None else policy.rate.text,
    }


def _mail(mail: MailConfig | None, *, valid: bool) -> dict[str, object]:
    """The mailbox values; those named by a problem are overridden as invalid by describe."""
    if mail is None:
        return {}
    timeout = f"{mail.timeout_s:g}s"
    values: dict[str, object] = {
        "MAIL_PROVIDER": mail.provider,
        "MAIL_AUTH_MODE": mail.auth_mode,
        "MAIL_USERNAME": mail.username or None,
        "MAIL_PASSWORD": mail.password,
        "MAIL_FROM": mail.from_addr or None,
        "MAIL_ALIASES": list(mail.aliases),
        "IMAP_HOST": mail.imap_host,
        "IMAP_PORT": mail.imap_port,
        "SMTP_HOST": mail.smtp_host,
        "SMTP_PORT": mail.smtp_port,
        "SMTP_TLS_MODE": mail.smtp_tls_mode,
        "SMTP_MAX_CONNECTIONS": mail.smtp_max_connections,
        "MAIL_TIMEOUT": timeout,
        "MAIL_TLS_CA_FILE": mail.tls_ca_file,
        "MAIL_ALLOW_PRIVATE_HOSTS": _switch(mail.allow_private_hosts),
    }
    # Outside an OAuth login any value of these is a problem naming it: unnamed, they are unset.
    if valid or mail.provider not in ("gmail", "outlook", "microsoft"):
        values.update(dict.fromkeys(_MAIL_OAUTH, "unset"))
    values.update(_oauth(mail))
    return values


def _oauth(mail: MailConfig) -> dict[str, object]:
    """The grant's values by variable name (secrets stay Secret: describe shows them as set)."""
    grant = mail.oauth
    if grant is None:
        return {}
    if grant.issuer == "google":
        return {
            "GOOGLE_CLIENT_ID": grant.client_id,
            "GOOGLE_CLIENT_SECRET": grant.client_secret,
            "GOOGLE_REFRESH_TOKEN": grant.refresh_token,
        }
    values: dict[str, object] = {
        "MICROSOFT_CLIENT_ID": grant.client_id,
        "MICROSOFT_CLIENT_SECRET": grant.client_secret,
        "MICROSOFT_REFRESH_TOKEN": grant.refresh_token,
        "MICROSOFT_TENANT_ID": grant.tenant,
    }
    if mail.graph is not None:
        values["MICROSOFT_ACCOUNT_ID"] = mail.graph.account_id
        values["MICROSOFT_TOKEN_ENCRYPTION_KEY"] = mail.graph.token_key
    return values


def _store(store: StoreConfig | None) -> dict[str, object]:
    if store is None:
        return {}
    return {
        "ANGELOS_REDIS_URL": _store_url(store),
        "ANGELOS_DATA_DIR": store.data_dir,
        "XDG_DATA_HOME": store.xdg_data_home,
        "HOME": store.home,
        "SEND_LEDGER_NAMESPACE": store.namespace,
        "ANGELOS_LEDGER_HMAC_KEY": store.hmac_key,
        "SEND_LEDGER_FSYNC": "provider_managed" if store.fsync_provider_managed else None,
        "SEND_LEDGER_ASSUME_NOEVICTION": _switch(store.assume_noeviction),
        "SEND_LEDGER_WAITAOF_REPLICAS": store.waitaof_replicas,
        "SEND_LEDGER_WAIT_REPLICAS": store.wait_replicas,
        "SEND_LEDGER_FSYNC_TIMEOUT_MS": store.fsync_timeout_ms,
        "SEND_LEDGER_RETENTION_S": store.retention_s,
        "SEND_TOOL_DEADLINE_S": store.tool_deadline_s,
        "SMTP_DATA_TERMINATION_TIMEOUT_S": store.smtp_data_termination_timeout_s,
        "SEND_DISPATCH_DEADLINE_S": store.dispatch_deadline_s,
        "SEND_OUTCOME_PERSIST_WINDOW_S": store.outcome_persist_window_s,
        "SENT_FILING_TIMEOUT_S": store.sent_filing_timeout_s,
        "SEND_RECOVERY_GRACE_S": store.recovery_grace_s,
        "SEND_RECOVERY_INTERVAL_S": store.recovery_interval_s,
        "SEND_DISPATCHER_LEASE_MS": store.dispatcher_lease_ms,
        "SEND_DISPATCHER_LEASE_REFRESH_MS": store.dispatcher_lease_refresh_ms,
        "SEND_ANNOTATION_CAP": store.annotation_cap,
        "ANGELOS_LEDGER_ARCHIVE_DIR": store.archive_dir,
        "ANGELOS_AUDIT_SIGNING_KEY": store.audit_signing_key,
        "ANGELOS_LEDGER_ARCHIVE_CHECKPOINT_S": store.archive_checkpoint_s,
        "ANGELOS_LEDGER_ARCHIVE_SEGMENT_BYTES": store.archive_segment_bytes,
        "ANGELOS_REDIS_REST_URL": "unset",  # any value is a store problem
        "ANGELOS_REDIS_REST_TOKEN": "unset",
        "ANGELOS_ENV": _switch(store.test_mode),
        "ANGELOS_ALLOW_FAULT_INJECTION": _switch(store.test_mode),
        "ANGELOS_TEST_PREPARE_TTL_MS": store.test_prepare_ttl_ms,
    }


def _store_url(store: StoreConfig) -> str:
    if store.mode != "redis" or store.url is None:
        return "off" if store.mode == "off" else "unset (embedded Redis)"
    target, _ = parse_redis_url(store.url.reveal())
    if target is None:  # cannot happen: the loader accepted it
        return "set"
    credentials = " (credentials set)" if target.has_credentials else ""
    return target.redacted() + credentials


def _http(config: Config) -> dict[str, object]:
    auth: HttpAuthConfig | None = config.http_auth or config.http_auth_shown
    if auth is None:
        return {} if config.http_auth_problems else dict.fromkeys(_MCP, None)
    return {
        "MCP_RESOURCE_URL": auth.resource_url,
        "MCP_OAUTH_ISSUER": auth.issuer,
        "MCP_OAUTH_JWKS_URL": auth.jwks_url,
        "MCP_ALLOWED_SUBJECTS": list(auth.allowed_subjects),
        "MCP_OAUTH_INITIAL_SCOPES": " ".join(auth.initial_scopes),
        "MCP_OAUTH_CA_FILE": auth.ca_file,
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": _switch(auth.allow_private_hosts),
    }


def _first_party(config: Config) -> dict[str, object]:
    """The ANGELOS_OAUTH_* values; the signing key and the bootstrap hash only as set/unset."""
    first_party: FirstPartyConfig | None = config.first_party
    if not config.first_party_enabled:
        return {
            "ANGELOS_OAUTH_SIGNING_KEY_PEM": "unset",
            "ANGELOS_OAUTH_SIGNING_KEY_ID": None,
            "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": [],
            "ANGELOS_OAUTH_CLIENTS_JSON": [],
            "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED": "off",
            "ANGELOS_OAUTH_REGISTRATION_ENABLED": "off",
            "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": "unset",
            "ANGELOS_TRUSTED_PROXIES": [],
            "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED": "unset",  # a problem only in first-party mode
        }
    if first_party is None:
        shown = dict(config.first_party_shown)  # what resolved beside the broken variables
        return {**shown, "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED": "unset"}
    return {
        "ANGELOS_OAUTH_SIGNING_KEY_PEM": "set",
        "ANGELOS_OAUTH_SIGNING_KEY_ID": first_party.signing_kid,
        "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": [key.kid for key in first_party.verification_keys],
        "ANGELOS_OAUTH_CLIENTS_JSON": [client.client_id for client in first_party.clients],
        "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED": _switch(first_party.cimd_enabled),
        "ANGELOS_OAUTH_REGISTRATION_ENABLED": _switch(first_party.registration_enabled),
        "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": "unset"
        if first_party.bootstrap_hash is None
        else "set",
        "ANGELOS_TRUSTED_PROXIES": [str(network) for network in first_party.trusted_proxies],
        "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED": "unset",
    }


def _warnings(config: Config) -> list[str]:
    """Settings that weaken what the resource server trusts, or what the ledger checks."""
    auth = config.http_auth
    lines = _attestations(config.store)
    if auth is not None and auth.allow_private_hosts:
        lines.append(
            "WARNING: MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1: the resource server trusts issuers and"
            " signing keys on private and loopback hosts and on any port; for tests and"
            " self-hosted issuers only"
        )
    if auth is not None and auth.ca_file is not None:
        lines.append(
            "WARNING: MCP_OAUTH_CA_FILE is set: signing keys are fetched trusting the CAs in"
            " that file as well as the system CAs"
        )
    return lines


def _attestations(store: StoreConfig | None) -> list[str]:
    """The durability settings the operator vouches for instead of the self-check."""
    if store is None or store.mode != "redis":
        return []
    lines = []
    if store.fsync_provider_managed:
        lines.append(
            "WARNING: SEND_LEDGER_FSYNC=provider_managed: YOU ATTEST that the Redis provider"
            " keeps every acknowledged write through a crash and a failover; angelos cannot read"
            " appendonly/appendfsync there and does not check them"
        )
    if store.assume_noeviction:
        lines.append(
            "WARNING: SEND_LEDGER_ASSUME_NOEVICTION=1: YOU ATTEST that the Redis store never"
            " evicts keys; angelos does not check maxmemory-policy"
        )
    return lines


def _local(config: Config) -> dict[str, object]:
    if config.local is None:
        return {}
    return {
        "ANGELOS_LOCAL_OWNER": config.local.owner,
        "ANGELOS_LOCAL_SCOPES": " ".join(config.local.scopes),
    }


LEDGER_GROUPS: Final = frozenset({"loading", "store", "timing"})


def ledger_problems(config: Config) -> tuple[str, ...]:
    """The problems that concern the ledger commands alone (env file and store settings)."""
    loading = () if config.env_file is None else tuple(config.env_file.problems)
    return loading + config.store_problems


def check_config_lines(config: Config, *, ledger_only: bool = False) -> list[str]:
    """Render every variable by group with its effective value, warnings, then the problems.

    `ledger_only` keeps what `angelos ledger` reads (an auditor has no mailbox to configure).
    """
    values = describe(config)
    from_file = set() if config.env_file is None else set(config.env_file.names)
    heading = "Effective ledger configuration:" if ledger_only else "Effective configuration:"
    lines = [heading]
    for group in GROUPS:
        if ledger_only and group.key not in LEDGER_GROUPS:
            continue
        lines.append(f"  # {group.title}")
        for variable in VARIABLES:
            if variable.group == group.key:
                source = "  (from the env file)" if variable.name in from_file else ""
                lines.append(f"  {variable.name} = {_text(values[variable.name])}{source}")
    if not ledger_only:
        lines.extend(_warnings(config))
    problems = ledger_problems(config) if ledger_only else config.problems
    if problems:
        lines.append(f"Problems ({len(problems)}):")
        lines.extend(f"  - {problem}" for problem in problems)
    else:
        lines.append("No problems found.")
    return lines


def _text(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        text = ", ".join(map(str, value)) if value else "none"
    else:
        text = str(value)
    # Names and paths come from the operator's environment; keep terminal controls out.
    return "".join(ch if ch.isprintable() else "?" for ch in text)
