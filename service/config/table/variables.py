"""Every environment variable angelos reads, each declared once: check-config, the docs and the
loaders all come from this table.

An entry holds the name, the default, secrecy, the typed rule that both checks a value and
writes the rule text, and the meaning; what relations between variables add to a rule text is
beside it in `also`, the relation itself in the loader of its group. The entries of the mailbox,
send policy, HTTP and OAuth, and ledger groups live in mailbox.py, send_policy.py, oauth.py and
ledger.py beside this module and are spliced in at their place. docs/configuration.md renders
this table (scripts/config_reference.py rewrites it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from service.config._values import value_of
from service.config.table.entry import Group, Variable
from service.config.table.ledger import LEDGER_VARIABLES
from service.config.table.mailbox import MAILBOX_VARIABLES
from service.config.table.oauth import HTTP_VARIABLES, OAUTH_VARIABLES
from service.config.table.rules import (
    Custom,
    Int,
    Refused,
    Switch,
)

GROUPS: Final = (
    Group("loading", "Loading", "Where the variables come from besides the environment."),
    Group("mailbox", "Mailbox", "The one mailbox: provider preset, login, endpoints, limits."),
    Group("gates", "Operator gates", "Each is on only for the exact value `1`, off otherwise."),
    Group(
        "send_policy",
        "Send policy",
        "What the owner requires of every send, whoever calls: human approval, the recipients"
        " a send may have and how many sends a window allows. Each preparation records the"
        " approval it needs and the allowlist it was checked against; the claim of"
        " `mail_send_confirmed` enforces all three. A value these rules refuse is a"
        " configuration problem and keeps sending off.",
    ),
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

_REST = Refused("not supported by this version; use ANGELOS_REDIS_URL")
_REST_EFFECT = "the REST store is not supported; use `ANGELOS_REDIS_URL`"


VARIABLES: Final = (
    *MAILBOX_VARIABLES,
    *HTTP_VARIABLES,
    *LEDGER_VARIABLES,
    *OAUTH_VARIABLES,
    Variable(
        "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED",
        "refused",
        Refused(
            "renamed: set ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=1 instead, which admits every"
            " client metadata document, not only ChatGPT's"
        ),
        "the switch of earlier releases; in first-party mode any value is a problem, so an"
        " upgrade never drops ChatGPT silently",
    ),
    Variable("ANGELOS_REDIS_REST_URL", "refused", _REST, _REST_EFFECT),
    Variable("ANGELOS_REDIS_REST_TOKEN", "refused", _REST, _REST_EFFECT, secret=True),
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
