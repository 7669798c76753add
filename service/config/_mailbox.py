"""Mailbox variables: provider presets, credentials, endpoints (docs/configuration.md)."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from providers.smtp import DEFAULT_MAX_CONNECTIONS
from providers.smtp.settings import TlsMode
from schemas.secret import Secret
from service.config._model import GraphAccount, MailConfig, OAuthLogin
from service.config._values import has_control, is_bare_address, utf8_size, value_of
from service.config.table.variables import BY_NAME, VARIABLES, read

_AUTH_MODES: dict[str, tuple[str, ...]] = {
    "spacemail": ("password",),
    "custom": ("password",),
    "gmail": ("google_oauth2", "app_password"),
    "icloud": ("app_password",),
    "yahoo": ("app_password",),
    "outlook": ("microsoft_oauth2",),
    "microsoft": ("microsoft_graph",),
}
_OAUTH_MODES = frozenset({"google_oauth2", "microsoft_oauth2", "microsoft_graph"})
_ADDRESS_USERNAME = frozenset({"gmail", "icloud", "yahoo", "outlook", "microsoft"})
_PINNED = frozenset({"gmail", "icloud", "yahoo", "outlook"})
_IMAP_PRESET = {
    "spacemail": "mail.spacemail.com",
    "gmail": "imap.gmail.com",
    "icloud": "imap.mail.me.com",
    "yahoo": "imap.mail.yahoo.com",
    "outlook": "outlook.office365.com",
}
_SMTP_PRESET = {
    "spacemail": "mail.spacemail.com",
    "gmail": "smtp.gmail.com",
    "icloud": "smtp.mail.me.com",
    "yahoo": "smtp.mail.yahoo.com",
    "outlook": "smtp.office365.com",
}
_PINNED_SMTP_PORTS = {"gmail": (465, 587), "icloud": (587,), "yahoo": (465, 587), "outlook": (587,)}
# Providers that file a copy of every message they accept in Sent themselves.
_FILES_SENT = frozenset({"gmail", "outlook", "microsoft"})
_GOOGLE_VARS = tuple(v.name for v in VARIABLES if v.name.startswith("GOOGLE_"))
_MICROSOFT_VARS = tuple(v.name for v in VARIABLES if v.name.startswith("MICROSOFT_"))
# What outlook reads of them (the rest are Graph's); the client secret is optional.
_OUTLOOK_REQUIRED = ("MICROSOFT_CLIENT_ID", "MICROSOFT_REFRESH_TOKEN", "MICROSOFT_TENANT_ID")
_OUTLOOK_VARS = (*_OUTLOOK_REQUIRED, "MICROSOFT_CLIENT_SECRET")
_MAX_ALIASES = 50
_MAX_ALIASES_BYTES = 16 * 1024


class MailLoad(msgspec.Struct, frozen=True):
    """The outcome of loading the mailbox group."""

    mail: MailConfig | None
    problems: tuple[str, ...]
    timeout_ms: int | None  # the effective MAIL_TIMEOUT when valid; the ledger rules need it
    provider: str | None  # the provider when MAIL_PROVIDER is valid
    shown: MailConfig | None = None  # for check-config: what resolved despite the problems


class _Endpoints(msgspec.Struct):
    imap_host: str = ""
    imap_port: int = 993
    smtp_host: str = ""
    smtp_port: int = 465
    smtp_tls_mode: TlsMode = "tls"


def load_mail(env: Mapping[str, str]) -> MailLoad:
    """Validate the mailbox variables, collecting every problem instead of stopping at one."""
    problems: list[str] = []
    provider: str | None = read(env, "MAIL_PROVIDER", problems)
    auth_mode = _auth_mode(env, provider, problems)
    username = _username(env, provider, problems)
    password = _password(env, auth_mode, problems)
    from_addr = _from_addr(env, provider, username, problems)
    aliases = _aliases(env, provider, problems)
    endpoints = _endpoints(env, provider, problems)
    timeout_ms: int | None = read(env, "MAIL_TIMEOUT", problems)
    max_connections: int | None = read(env, "SMTP_MAX_CONNECTIONS", problems)
    tls_ca_file = read(env, "MAIL_TLS_CA_FILE", problems)
    oauth = _check_google(env, provider, auth_mode, problems)
    microsoft, graph = _check_microsoft(env, provider, problems)
    oauth = microsoft or oauth

    if provider is None or auth_mode is None:
        return MailLoad(
            mail=None, problems=tuple(problems), timeout_ms=timeout_ms, provider=provider
        )
    imap_lower = endpoints.imap_host.lower()
    smtp_lower = endpoints.smtp_host.lower()
    mail = MailConfig(
        provider=provider,
        auth_mode=auth_mode,
        username=username or "",
        password=None if password is None else Secret(password),
        from_addr=from_addr or username or "",
        aliases=aliases,
        imap_host=endpoints.imap_host,
        imap_port=endpoints.imap_port,
        smtp_host=endpoints.smtp_host,
        smtp_port=endpoints.smtp_port,
        smtp_tls_mode=endpoints.smtp_tls_mode,
        smtp_max_connections=max_connections or DEFAULT_MAX_CONNECTIONS,
        timeout_s=(timeout_ms or BY_NAME["MAIL_TIMEOUT"].unset) / 1000,
        tls_ca_file=tls_ca_file,
        allow_private_hosts=read(env, "MAIL_ALLOW_PRIVATE_HOSTS", problems),
        gmail_imap=provider == "gmail" or imap_lower in ("imap.gmail.com", "imap.googlemail.com"),
        smtp_stores_sent=provider in _FILES_SENT
        or smtp_lower in ("smtp.gmail.com", "smtp.googlemail.com"),
        oauth=oauth,
        graph=graph,
    )
    valid = not problems and username is not None
    return MailLoad(
        mail=mail if valid else None,
        problems=tuple(problems),
        timeout_ms=timeout_ms,
        provider=provider,
        shown=mail,
    )


def _auth_mode(env: Mapping[str, str], provider: str | None, problems: list[str]) -> str | None:
    if provider is None:
        return None
    allowed = _AUTH_MODES[provider]
    mode = value_of(env, "MAIL_AUTH_MODE") or allowed[0]
    if mode not in allowed:
        problems.append(f"MAIL_AUTH_MODE: {provider} allows only " + " or ".join(allowed))
        return None
    return mode


def _username(env: Mapping[str, str], provider: str | None, problems: list[str]) -> str | None:
    if value_of(env, "MAIL_USERNAME") is None:
        problems.append("MAIL_USERNAME: required")
        return None
    username: str | None = read(env, "MAIL_USERNAME", problems)
    if username is None:
        return None
    if provider in _ADDRESS_USERNAME and not is_bare_address(username):
        problems.append(f"MAIL_USERNAME: {provider} needs a complete bare email address")
        return None
    return username


def _password(env: Mapping[str, str], auth_mode: str | None, problems: list[str]) -> str | None:
    password = value_of(env, "MAIL_PASSWORD")
    if auth_mode in ("password", "app_password") and password is None:
        problems.append(f"MAIL_PASSWORD: required for {auth_mode} login")
    if auth_mode in _OAUTH_MODES and password is not None:
        problems.append(f"MAIL_PASSWORD: must be unset for {auth_mode}")
    if password is not None:
        read(env, "MAIL_PASSWORD", problems)  # the value stays shown as set even when refused
    return password


def _from_addr(
    env: Mapping[str, str], provider: str | None, username: str | None, problems: list[str]
) -> str | None:
    explicit = value_of(env, "MAIL_FROM")
    if explicit is None:
        if username is not None and not is_bare_address(username):
            problems.append("MAIL_FROM: required because MAIL_USERNAME is not a bare email address")
        return username
    if read(env, "MAIL_FROM", problems) is None:
        return None
    if provider == "microsoft" and username is not None and explicit.lower() != username.lower():
        problems.append("MAIL_FROM: must equal MAIL_USERNAME (case-insensitive) for microsoft")
    return explicit


def _aliases(env: Mapping[str, str], provider: str | None, problems: list[str]) -> tuple[str, ...]:
    raw = value_of(env, "MAIL_ALIASES")
    if raw is None:
        return ()
    if provider == "microsoft":
        problems.append("MAIL_ALIASES: not allowed for microsoft")
        return ()
    if utf8_size(raw) > _MAX_ALIASES_BYTES:
        problems.append("MAIL_ALIASES: must be at most 16 KiB")
        return ()
    if has_control(raw):
        problems.append("MAIL_ALIASES: must not contain control characters")
        return ()
    items = tuple(item.strip() for item in raw.split(","))
    if len(items) > _MAX_ALIASES:
        problems.append(f"MAIL_ALIASES: at most {_MAX_ALIASES} addresses")
    elif not all(is_bare_address(item) for item in items):
        problems.append("MAIL_ALIASES: each comma-separated item must be a bare email address")
    elif len({item.lower() for item in items}) != len(items):
        problems.append("MAIL_ALIASES: addresses must be unique (case-insensitive)")
    else:
        return items
    return ()


def _endpoints(env: Mapping[str, str], provider: str | None, problems: list[str]) -> _Endpoints:
    result = _Endpoints()
    imap_port: int | None = read(env, "IMAP_PORT", problems)
    smtp_port: int | None = read(env, "SMTP_PORT", problems)
    tls_mode: TlsMode | None = read(env, "SMTP_TLS_MODE", problems)
    if provider is None:
        return result
    if provider == "microsoft":
        _check_microsoft_endpoints(env, imap_port, smtp_port, tls_mode, problems)
        return result

    result.imap_host = _host(env, "IMAP_HOST", provider, _IMAP_PRESET, problems)
    result.smtp_host = _host(env, "SMTP_HOST", provider, _SMTP_PRESET, problems)
    result.imap_port = 993 if imap_port is None else imap_port
    default_smtp_port = 587 if provider in ("icloud", "outlook") else 465
    result.smtp_port = default_smtp_port if smtp_port is None else smtp_port
    if provider in _PINNED and result.imap_port != 993:
        problems.append(f"IMAP_PORT: {provider} requires 993")
    allowed_smtp = _PINNED_SMTP_PORTS.get(provider)
    if allowed_smtp is not None and result.smtp_port not in allowed_smtp:
        problems.append(f"SMTP_PORT: {provider} requires " + " or ".join(map(str, allowed_smtp)))
    result.smtp_tls_mode = tls_mode or ("starttls" if result.smtp_port == 587 else "tls")
    if result.smtp_port == 587 and result.smtp_tls_mode != "starttls":
        problems.append("SMTP_TLS_MODE: port 587 requires starttls")
    if result.smtp_port == 465 and result.smtp_tls_mode != "tls":
        problems.append("SMTP_TLS_MODE: port 465 requires tls")
    return result


def _host(
    env: Mapping[str, str], name: str, provider: str, presets: dict[str, str], problems: list[str]
) -> str:
    override = value_of(env, name)
    preset = presets.get(provider)
    if override is None:
        if preset is None:
            problems.append(f"{name}: required for MAIL_PROVIDER={provider}")
            return ""
        return preset
    if provider in _PINNED and override.lower() != preset:
        problems.append(f"{name}: {provider} requires {preset}")
        return ""
    host: str | None = read(env, name, problems)
    return host or ""


def _check_microsoft_endpoints(
    env: Mapping[str, str],
    imap_port: int | None,
    smtp_port: int | None,
    tls_mode: str | None,
    problems: list[str],
) -> None:
    if value_of(env, "IMAP_HOST") is not None:
        problems.append("IMAP_HOST: must be unset for microsoft")
    if value_of(env, "SMTP_HOST") is not None:
        problems.append("SMTP_HOST: must be unset for microsoft")
    if imap_port not in (None, 993):
        problems.append("IMAP_PORT: must be unset or 993 for microsoft")
    if smtp_port not in (None, 465):
        problems.append("SMTP_PORT: must be unset or 465 for microsoft")
    if tls_mode not in (None, "tls"):
        problems.append("SMTP_TLS_MODE: must be unset or tls for microsoft")


def _check_google(
    env: Mapping[str, str], provider: str | None, auth_mode: str | None, problems: list[str]
) -> OAuthLogin | None:
    wanted = provider == "gmail" and auth_mode == "google_oauth2"
    values: dict[str, str] = {}
    for name in _GOOGLE_VARS:
        if value_of(env, name) is None:
            if wanted:
                problems.append(f"{name}: required for gmail with google_oauth2")
        elif not wanted:
            problems.append(f"{name}: only allowed with MAIL_PROVIDER=gmail and google_oauth2")
        elif (value := read(env, name, problems)) is not None:
            values[name] = value
    if len(values) != len(_GOOGLE_VARS):
        return None
    return OAuthLogin(
        issuer="google",
        client_id=values["GOOGLE_CLIENT_ID"],
        client_secret=Secret(values["GOOGLE_CLIENT_SECRET"]),
        refresh_token=Secret(values["GOOGLE_REFRESH_TOKEN"]),
    )


def _check_microsoft(
    env: Mapping[str, str], provider: str | None, problems: list[str]
) -> tuple[OAuthLogin | None, GraphAccount | None]:
    """Outlook's grant (the client secret optional), or Graph's (all six values required)."""
    values: dict[str, str] = {}
    for name in _MICROSOFT_VARS:
        if value_of(env, name) is None:
            if provider == "microsoft" or (provider == "outlook" and name in _OUTLOOK_REQUIRED):
                problems.append(f"{name}: required for {provider}")
        elif provider == "outlook" and name not in _OUTLOOK_VARS:
            problems.append(f"{name}: only allowed with MAIL_PROVIDER=microsoft")
        elif provider not in ("microsoft", "outlook"):
            problems.append(f"{name}: only allowed with MAIL_PROVIDER=outlook or microsoft")
        elif (value := read(env, name, problems)) is not None:
            values[name] = value
    required = _OUTLOOK_REQUIRED if provider == "outlook" else _MICROSOFT_VARS
    if provider not in ("outlook", "microsoft") or any(name not in values for name in required):
        return None, None
    secret = values.get("MICROSOFT_CLIENT_SECRET")
    login = OAuthLogin(
        issuer="microsoft",
        client_id=values["MICROSOFT_CLIENT_ID"],
        client_secret=None if secret is None else Secret(secret),
        refresh_token=Secret(values["MICROSOFT_REFRESH_TOKEN"]),
        tenant=values["MICROSOFT_TENANT_ID"],
    )
    if provider == "outlook":
        return login, None
    return login, GraphAccount(
        account_id=values["MICROSOFT_ACCOUNT_ID"],
        token_key=Secret(values["MICROSOFT_TOKEN_ENCRYPTION_KEY"].lower()),
    )
