"""Assemble the whole Config from one environment mapping."""

from __future__ import annotations

from collections.abc import Mapping

from service.config._first_party import (
    first_party_enabled,
    first_party_origin,
    load_first_party,
)
from service.config._http_auth import load_http_auth, load_local
from service.config._mailbox import load_mail
from service.config._model import Config, EnvFileInfo, Gates
from service.config._rules import parse_port, value_of
from service.config._store import load_store

DEFAULT_PORT = 8080


def load_config(env: Mapping[str, str], env_file: EnvFileInfo | None = None) -> Config:
    """Read env alone, collect every problem, and never raise.

    env_file describes the env file already merged into env (see with_env_file); its problems
    come first. No file is ever looked for here.
    """
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
    first_party, first_party_problems = load_first_party(env, http_auth, mail.mail, store)
    http_problems += first_party_problems
    if first_party_enabled(env) and first_party is None:
        http_auth = None  # a broken first-party mode never falls back to external verification
    port, port_problems = _port(env)
    file_problems = () if env_file is None else env_file.problems
    return Config(
        mail=mail.mail,
        store=store,
        gates=gates,
        http_auth=http_auth,
        local=local,
        port=port,
        problems=file_problems
        + mail.problems
        + http_problems
        + local_problems
        + store_problems
        + port_problems,
        http_auth_problems=http_problems,
        store_problems=store_problems,
        env_file=env_file,
        mail_shown=mail.shown,
        demo_send=env.get("ANGELOS_DEMO_SEND") == "1",
        first_party_enabled=first_party_enabled(env),
        first_party_origin=first_party_origin(env),
        first_party=first_party,
        first_party_problems=first_party_problems,
    )


def _port(env: Mapping[str, str]) -> tuple[int, tuple[str, ...]]:
    raw = value_of(env, "PORT")
    if raw is None:
        return DEFAULT_PORT, ()
    port = parse_port(raw)
    if port is None:
        return DEFAULT_PORT, ("PORT: must be an integer 1..65535",)
    return port, ()
