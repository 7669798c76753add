"""Mailbox variables: provider presets, credentials, endpoints (docs/configuration.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import msgspec

from providers.smtp import DEFAULT_MAX_CONNECTIONS
from providers.smtp.settings import TlsMode
from schemas.secret import Secret
from service.config._files import load_ca_file
from service.config._model import MailConfig
from service.config._rules import (
    dns_host_problem,
    has_control,
    has_cr_lf_nul,
    is_bare_address,
    parse_decimal,
    parse_go_duration,
    parse_port,
    utf8_size,
    value_of,
)

PROVIDERS = ("spacemail", "gmail", "icloud", "yahoo", "microsoft", "custom")
DEFAULT_TIMEOUT_MS = 30_000

_AUTH_MODES: dict[str, tuple[str, ...]] = {
    "spacemail": ("password",),
    "custom": ("password",),
    "gmail": ("google_oauth2", "app_password"),
    "icloud": ("app_password",),
    "yahoo": ("app_password",),
    "microsoft": ("microsoft_graph",),
}
_ADDRESS_USERNAME = frozenset({"gmail", "icloud", "yahoo", "microsoft"})
_PINNED = frozenset({"gmail", "icloud", "yahoo"})
_IMAP_PRESET = {
    "spacemail": "mail.spacemail.com",
    "gmail": "imap.gmail.com",
    "icloud": "imap.mail.me.com",
    "yahoo": "imap.mail.yahoo.com",
}
_SMTP_PRESET = {
    "spacemail": "mail.spacemail.com",
    "gmail": "smtp.gmail.com",
    "icloud": "smtp.mail.me.com",
    "yahoo": "smtp.mail.yahoo.com",
}
_PINNED_SMTP_PORTS = {"gmail": (465, 587), "icloud": (587,), "yahoo": (465, 587)}
_GOOGLE_VARS = ("GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET", "GOOGLE_REFRESH_TOKEN")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_MAX_ALIASES = 50
_MAX_ALIASES_BYTES = 16 * 1024
_MAX_TOKEN_CHARS = 16384
_MIN_TIMEOUT_NS = 1_000_000_000
_MAX_TIMEOUT_NS = 120_000_000_000
_MAX_SMTP_CONNECTIONS = 32
_TLS_MODES: dict[str, TlsMode] = {"tls": "tls", "starttls": "starttls"}

UNSUPPORTED_MICROSOFT = (
    "MAIL_PROVIDER: microsoft (Microsoft Graph) is not supported by this release; "
    "use an IMAP/SMTP provider with password or app_password login"
)
UNSUPPORTED_GOOGLE_OAUTH = (
    "MAIL_AUTH_MODE: google_oauth2 is not supported by this release; "
    "use MAIL_AUTH_MODE=app_password with a Google app password"
)


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
    provider: str | None = value_of(env, "MAIL_PROVIDER") or "spacemail"
    if provider not in PROVIDERS:
        problems.append("MAIL_PROVIDER: must be one of " + ", ".join(PROVIDERS))
        provider = None
    auth_mode = _auth_mode(env, provider, problems)
    username = _username(env, provider, problems)
    password = _password(env, auth_mode, problems)
    from_addr = _from_addr(env, provider, username, problems)
    aliases = _aliases(env, provider, problems)
    endpoints = _endpoints(env, provider, problems)
    timeout_ms = _timeout_ms(env, problems)
    max_connections = _max_connections(env, problems)
    tls_ca_file = load_ca_file(env, "MAIL_TLS_CA_FILE", problems)
    _check_google(env, provider, auth_mode, problems)
    _check_microsoft(env, provider, problems)
    if provider == "microsoft":
        problems.append(UNSUPPORTED_MICROSOFT)
    elif auth_mode == "google_oauth2":
        problems.append(UNSUPPORTED_GOOGLE_OAUTH)

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
        smtp_max_connections=max_connections,
        timeout_s=(timeout_ms or DEFAULT_TIMEOUT_MS) / 1000,
        tls_ca_file=tls_ca_file,
        allow_private_hosts=env.get("MAIL_ALLOW_PRIVATE_HOSTS") == "1",
        gmail_imap=provider == "gmail" or imap_lower in ("imap.gmail.com", "imap.googlemail.com"),
        smtp_stores_sent=provider in ("gmail", "microsoft")
        or smtp_lower in ("smtp.gmail.com", "smtp.googlemail.com"),
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
    username = value_of(env, "MAIL_USERNAME")
    if username is None:
        problems.append("MAIL_USERNAME: required")
        return None
    if has_cr_lf_nul(username):
        problems.append("MAIL_USERNAME: must not contain CR, LF or NUL")
        return None
    if provider in _ADDRESS_USERNAME and not is_bare_address(username):
        problems.append(f"MAIL_USERNAME: {provider} needs a complete bare email address")
        return None
    return username


def _password(env: Mapping[str, str], auth_mode: str | None, problems: list[str]) -> str | None:
    password = value_of(env, "MAIL_PASSWORD")
    if auth_mode in ("password", "app_password") and password is None:
        problems.append(f"MAIL_PASSWORD: required for {auth_mode} login")
    if auth_mode in ("google_oauth2", "microsoft_graph") and password is not None:
        problems.append(f"MAIL_PASSWORD: must be unset for {auth_mode}")
    if password is not None and has_cr_lf_nul(password):
        problems.append("MAIL_PASSWORD: must not contain CR, LF or NUL")
    return password


def _from_addr(
    env: Mapping[str, str], provider: str | None, username: str | None, problems: list[str]
) -> str | None:
    explicit = value_of(env, "MAIL_FROM")
    if explicit is None:
        if username is not None and not is_bare_address(username):
            problems.append("MAIL_FROM: required because MAIL_USERNAME is not a bare email address")
        return username
    if not is_bare_address(explicit):
        problems.append("MAIL_FROM: must be a bare email address (no display name, no CR/LF)")
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
    imap_host = value_of(env, "IMAP_HOST")
    smtp_host = value_of(env, "SMTP_HOST")
    imap_port = _port(env, "IMAP_PORT", problems)
    smtp_port = _port(env, "SMTP_PORT", problems)
    raw_mode = value_of(env, "SMTP_TLS_MODE")
    tls_mode = _TLS_MODES.get(raw_mode or "")
    if raw_mode is not None and tls_mode is None:
        problems.append("SMTP_TLS_MODE: must be tls or starttls")
    if provider is None:
        return result
    if provider == "microsoft":
        _check_microsoft_endpoints(imap_host, smtp_host, imap_port, smtp_port, tls_mode, problems)
        return result

    result.imap_host = _host("IMAP_HOST", imap_host, provider, _IMAP_PRESET, problems)
    result.smtp_host = _host("SMTP_HOST", smtp_host, provider, _SMTP_PRESET, problems)
    result.imap_port = 993 if imap_port is None else imap_port
    default_smtp_port = 587 if provider == "icloud" else 465
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


def _port(env: Mapping[str, str], name: str, problems: list[str]) -> int | None:
    raw = value_of(env, name)
    if raw is None:
        return None
    port = parse_port(raw)
    if port is None:
        problems.append(f"{name}: must be an integer 1..65535")
    return port


def _host(
    name: str, override: str | None, provider: str, presets: dict[str, str], problems: list[str]
) -> str:
    preset = presets.get(provider)
    if override is None:
        if preset is None:
            problems.append(f"{name}: required for MAIL_PROVIDER={provider}")
            return ""
        return preset
    if provider in _PINNED and override.lower() != preset:
        problems.append(f"{name}: {provider} requires {preset}")
        return ""
    rule = dns_host_problem(override)
    if rule is not None:
        problems.append(f"{name}: {rule}")
        return ""
    return override


def _check_microsoft_endpoints(
    imap_host: str | None,
    smtp_host: str | None,
    imap_port: int | None,
    smtp_port: int | None,
    tls_mode: str | None,
    problems: list[str],
) -> None:
    if imap_host is not None:
        problems.append("IMAP_HOST: must be unset for microsoft")
    if smtp_host is not None:
        problems.append("SMTP_HOST: must be unset for microsoft")
    if imap_port not in (None, 993):
        problems.append("IMAP_PORT: must be unset or 993 for microsoft")
    if smtp_port not in (None, 465):
        problems.append("SMTP_PORT: must be unset or 465 for microsoft")
    if tls_mode not in (None, "tls"):
        problems.append("SMTP_TLS_MODE: must be unset or tls for microsoft")


def _timeout_ms(env: Mapping[str, str], problems: list[str]) -> int | None:
    raw = value_of(env, "MAIL_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT_MS
    nanoseconds = parse_go_duration(raw)
    if nanoseconds is None:
        problems.append("MAIL_TIMEOUT: must be a duration such as 30s, 2m or 1m30s")
        return None
    if not _MIN_TIMEOUT_NS <= nanoseconds <= _MAX_TIMEOUT_NS:
        problems.append("MAIL_TIMEOUT: must be between 1s and 2m")
        return None
    return nanoseconds // 1_000_000


def _max_connections(env: Mapping[str, str], problems: list[str]) -> int:
    raw = value_of(env, "SMTP_MAX_CONNECTIONS")
    if raw is None:
        return DEFAULT_MAX_CONNECTIONS
    number = parse_decimal(raw)
    if number is None or not 1 <= number <= _MAX_SMTP_CONNECTIONS:
        problems.append(f"SMTP_MAX_CONNECTIONS: must be an integer 1..{_MAX_SMTP_CONNECTIONS}")
        return DEFAULT_MAX_CONNECTIONS
    return number


def _check_google(
    env: Mapping[str, str], provider: str | None, auth_mode: str | None, problems: list[str]
) -> None:
    wanted = provider == "gmail" and auth_mode == "google_oauth2"
    for name in _GOOGLE_VARS:
        value = value_of(env, name)
        if not wanted:
            if value is not None:
                problems.append(f"{name}: only allowed with MAIL_PROVIDER=gmail and google_oauth2")
        elif value is None:
            problems.append(f"{name}: required for gmail with google_oauth2")
        elif not _is_token(value, _MAX_TOKEN_CHARS):
            problems.append(f"{name}: must be 1-16384 characters without whitespace or controls")


def _check_microsoft(env: Mapping[str, str], provider: str | None, problems: list[str]) -> None:
    rules: dict[str, tuple[str, Callable[[str], bool]]] = {
        "MICROSOFT_CLIENT_ID": ("must be a UUID", lambda v: _UUID.fullmatch(v) is not None),
        "MICROSOFT_CLIENT_SECRET": (
            "must be 1-16384 characters without whitespace or controls",
            lambda v: _is_token(v, _MAX_TOKEN_CHARS),
        ),
        "MICROSOFT_REFRESH_TOKEN": (
            "must be 1-16384 characters without whitespace or controls",
            lambda v: _is_token(v, _MAX_TOKEN_CHARS),
        ),
        "MICROSOFT_TENANT_ID": (
            "must be a tenant UUID or consumers",
            lambda v: v == "consumers" or _UUID.fullmatch(v) is not None,
        ),
        "MICROSOFT_ACCOUNT_ID": (
            "must be 1-256 characters without whitespace or controls",
            lambda v: _is_token(v, 256),
        ),
        "MICROSOFT_TOKEN_ENCRYPTION_KEY": (
            "must be 64 hex characters",
            lambda v: _HEX64.fullmatch(v) is not None,
        ),
    }
    for name, (rule, accepts) in rules.items():
        value = value_of(env, name)
        if provider != "microsoft":
            if value is not None:
                problems.append(f"{name}: only allowed with MAIL_PROVIDER=microsoft")
        elif value is None:
            problems.append(f"{name}: required for microsoft")
        elif not accepts(value):
            problems.append(f"{name}: {rule}")


def _is_token(value: str, max_chars: int) -> bool:
    return (
        1 <= len(value) <= max_chars
        and not any(ch.isspace() for ch in value)
        and not has_control(value)
    )
