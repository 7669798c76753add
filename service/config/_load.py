"""Assemble the whole Config from one environment mapping, and describe it for operators."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from schemas.secret import Secret
from service.config._http_auth import load_http_auth, load_local
from service.config._mailbox import load_mail
from service.config._model import (
    Config,
    Gates,
    HttpAuthConfig,
    LocalPrincipal,
    MailConfig,
    StoreConfig,
)
from service.config._rules import parse_port, value_of
from service.config._store import load_store
from service.config._urls import parse_redis_url

DEFAULT_PORT = 8080


def load_config(env: Mapping[str, str]) -> Config:
    """Read env alone (never a .env file), collect every problem, and never raise."""
    gates = Gates(
        writes=env.get("MAIL_ENABLE_WRITES") == "1",
        send=env.get("MAIL_ENABLE_SEND") == "1",
        delete=env.get("MAIL_ENABLE_DELETE") == "1",
    )
    mail = load_mail(env)
    http_auth, http_problems = load_http_auth(env, gates)
    local, local_problems = load_local(env)
    store, store_problems = load_store(env, mail.timeout_ms)
    if mail.provider == "microsoft" and env.get("ANGELOS_REDIS_URL") == "off":
        store_problems += ("ANGELOS_REDIS_URL: microsoft needs a store; off is not allowed",)
    port, port_problems = _port(env)
    return Config(
        mail=mail.mail,
        store=store,
        gates=gates,
        http_auth=http_auth,
        local=local,
        port=port,
        problems=mail.problems + http_problems + local_problems + store_problems + port_problems,
        http_auth_problems=http_problems,
        store_problems=store_problems,
    )


def _port(env: Mapping[str, str]) -> tuple[int, tuple[str, ...]]:
    raw = value_of(env, "PORT")
    if raw is None:
        return DEFAULT_PORT, ()
    port = parse_port(raw)
    if port is None:
        return DEFAULT_PORT, ("PORT: must be an integer 1..65535",)
    return port, ()


def describe(config: Config) -> dict[str, object]:
    """Return the effective configuration as plain data, with secrets shown only as set/unset."""
    http_auth: object
    if config.http_auth is not None:
        http_auth = _describe_http_auth(config.http_auth)
    else:
        http_auth = "invalid" if config.http_auth_problems else "not configured"
    return {
        "mail": "invalid" if config.mail is None else _describe_mail(config.mail),
        "gates": {
            "writes": config.gates.writes,
            "send": config.gates.send,
            "delete": config.gates.delete,
        },
        "store": "invalid" if config.store is None else _describe_store(config.store),
        "http_auth": http_auth,
        "local": "invalid" if config.local is None else _describe_local(config.local),
        "port": config.port,
        "problems": list(config.problems),
    }


def _set_or_unset(secret: Secret | None) -> str:
    return "unset" if secret is None else "set"


def _describe_mail(mail: MailConfig) -> dict[str, object]:
    return {
        "provider": mail.provider,
        "auth_mode": mail.auth_mode,
        "username": mail.username,
        "password": _set_or_unset(mail.password),
        "from": mail.from_addr,
        "aliases": list(mail.aliases),
        "imap_host": mail.imap_host,
        "imap_port": mail.imap_port,
        "smtp_host": mail.smtp_host,
        "smtp_port": mail.smtp_port,
        "smtp_tls_mode": mail.smtp_tls_mode,
        "smtp_max_connections": mail.smtp_max_connections,
        "timeout_s": mail.timeout_s,
        "tls_ca_file": mail.tls_ca_file,
        "allow_private_hosts": mail.allow_private_hosts,
        "gmail_imap": mail.gmail_imap,
        "smtp_stores_sent": mail.smtp_stores_sent,
    }


def _describe_store(store: StoreConfig) -> dict[str, object]:
    url: str | None = None
    credentials = "unset"
    if store.url is not None:
        target, _ = parse_redis_url(store.url.reveal())
        if target is not None:
            url = target.redacted()
            credentials = "set" if target.has_credentials else "unset"
    return {
        "mode": store.mode,
        "url": url,
        "url_credentials": credentials,
        "data_dir": store.data_dir,
        "namespace": store.namespace,
        "hmac_key": _set_or_unset(store.hmac_key),
        "retention_s": store.retention_s,
        "fsync_provider_managed": store.fsync_provider_managed,
        "assume_noeviction": store.assume_noeviction,
        "waitaof_replicas": store.waitaof_replicas,
        "fsync_timeout_ms": store.fsync_timeout_ms,
        "tool_deadline_s": store.tool_deadline_s,
        "smtp_data_termination_timeout_s": store.smtp_data_termination_timeout_s,
        "dispatch_deadline_s": store.dispatch_deadline_s,
        "outcome_persist_window_s": store.outcome_persist_window_s,
        "sent_filing_timeout_s": store.sent_filing_timeout_s,
        "recovery_grace_s": store.recovery_grace_s,
        "recovery_interval_s": store.recovery_interval_s,
        "dispatcher_lease_ms": store.dispatcher_lease_ms,
        "dispatcher_lease_refresh_ms": store.dispatcher_lease_refresh_ms,
        "annotation_cap": store.annotation_cap,
        "test_mode": store.test_mode,
        "fault_point": store.fault_point,
        "test_prepare_ttl_ms": store.test_prepare_ttl_ms,
    }


def _describe_http_auth(http_auth: HttpAuthConfig) -> dict[str, object]:
    return {
        "resource_url": http_auth.resource_url,
        "issuer": http_auth.issuer,
        "jwks_url": http_auth.jwks_url,
        "allowed_subjects": list(http_auth.allowed_subjects),
        "initial_scopes": list(http_auth.initial_scopes),
    }


def _describe_local(local: LocalPrincipal) -> dict[str, object]:
    return {"owner": local.owner, "scopes": list(local.scopes)}


def check_config_lines(config: Config) -> list[str]:
    """Render the effective configuration, then one line per problem, for `angelos check-config`."""
    summary = describe(config)
    del summary["problems"]
    lines = ["Effective configuration:"]
    lines.extend(f"  {key} = {text}" for key, text in _flatten("", summary))
    if config.problems:
        lines.append(f"Problems ({len(config.problems)}):")
        lines.extend(f"  - {problem}" for problem in config.problems)
    else:
        lines.append("No problems found.")
    return lines


def _flatten(prefix: str, value: object) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flatten(f"{prefix}.{key}" if prefix else str(key), inner)
        return
    yield prefix, _text(value)


def _text(value: object) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        text = ", ".join(map(str, value)) if value else "(none)"
    else:
        text = str(value)
    # Names and paths come from the operator's environment; keep terminal controls out.
    return "".join(ch if ch.isprintable() else "?" for ch in text)
