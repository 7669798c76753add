"""Assemble the whole Config from one environment mapping."""

from __future__ import annotations

from collections.abc import Mapping

from service.config._first_party import (
    first_party_enabled,
    first_party_origin,
    first_party_shown,
    load_first_party,
)
from service.config._http_auth import load_http_auth, load_local
from service.config._mailbox import load_mail
from service.config._model import Config, EnvFileInfo, Gates
from service.config._send_policy import load_send_policy
from service.config._store import load_store
from service.config.table.variables import BY_NAME, read


def load_config(env: Mapping[str, str], env_file: EnvFileInfo | None = None) -> Config:
    """Read env alone, collect every problem, and never raise.

    env_file describes the env file already merged into env (see with_env_file); its problems
    come first. No file is ever looked for here.
    """
    send_policy, policy_problems = load_send_policy(env)
    gates = Gates(
        writes=read(env, "MAIL_ENABLE_WRITES", []),
        # A refused policy never falls back to a looser one: sending stays off until it is fixed
        # (an HTTP server starts despite problems outside its mailbox, store and principal).
        send=read(env, "MAIL_ENABLE_SEND", []) and not policy_problems,
        delete=read(env, "MAIL_ENABLE_DELETE", []),
    )
    mail = load_mail(env)
    http_auth, http_problems = load_http_auth(env, gates)
    local, local_problems = load_local(env)
    store, store_problems = load_store(env, mail.timeout_ms)
    if mail.provider == "microsoft" and env.get("ANGELOS_REDIS_URL") == "off":
        store_problems += ("ANGELOS_REDIS_URL: microsoft needs a store; off is not allowed",)
    first_party, first_party_problems = load_first_party(env, http_auth, mail.mail, store)
    http_problems += first_party_problems
    http_auth_shown, first_party_values = None, first_party_shown(env, first_party)
    if first_party_enabled(env) and first_party is None:
        http_auth_shown = http_auth
        http_auth = None  # a broken first-party mode never falls back to external verification
    port_problems: list[str] = []
    port: int = read(env, "PORT", port_problems) or BY_NAME["PORT"].unset
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
        + policy_problems
        + http_problems
        + local_problems
        + store_problems
        + tuple(port_problems),
        http_auth_problems=http_problems,
        store_problems=store_problems,
        env_file=env_file,
        mail_shown=mail.shown,
        demo_send=read(env, "ANGELOS_DEMO_SEND", []),
        send_policy=send_policy,
        first_party_enabled=first_party_enabled(env),
        first_party_origin=first_party_origin(env),
        first_party=first_party,
        first_party_problems=first_party_problems,
        http_auth_shown=http_auth_shown,
        first_party_shown=first_party_values,
    )
