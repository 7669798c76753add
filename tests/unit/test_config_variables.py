"""The variable table is the one source: the loaders read exactly its names, the docs list them.

docs/configuration.md is compared with the table both ways (names and defaults, then the whole
generated reference); the reads are recorded through a mapping the loaders are given, and the
source is scanned for names a test environment might not reach.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from service.config import check_config_lines, describe, load_config, with_env_file
from service.config.table.reference import BEGIN, END, markdown_reference
from service.config.table.variables import BY_NAME, GROUPS, VARIABLES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)`[^|]*\| ((?:[^|\\]|\\.)*) \|", re.MULTILINE)
# A whole string literal shaped like a variable name, and the reads that name one directly.
NAME_LITERAL = re.compile(r"""["']([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)["']""")
DIRECT_READ = re.compile(r"""(?:value_of\(\s*\w+\s*,\s*|\.get\(\s*)["']([A-Z][A-Z0-9_]*)["']""")


class Reads(Mapping[str, str]):
    """An environment that records every name looked up in it."""

    def __init__(self, env: dict[str, str], seen: set[str]) -> None:
        self._env = env
        self.seen = seen

    def __getitem__(self, name: str) -> str:
        self.seen.add(name)
        return self._env[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


# Between them these reach every branch that reads a variable: the defaults, test mode (which
# alone reads its hooks), a present MCP_ group (whose absence stops at the first name) and
# first-party mode (which alone reads the ANGELOS_OAUTH_ group).
ENVIRONMENTS = [
    {},
    {"ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test"},
    {"MCP_RESOURCE_URL": "https://mail.example.com/mcp", "ANGELOS_ENV_FILE": "/nonexistent"},
    {"ANGELOS_OAUTH_ENABLED": "1"},
]


def page_rows() -> list[tuple[str, str]]:
    """(name, default) of every variable row of the page's reference tables."""
    return ROW.findall(PAGE.read_text(encoding="utf-8"))


def recorded_reads() -> set[str]:
    seen: set[str] = set()
    for env in ENVIRONMENTS:
        merged, env_file = with_env_file(Reads(env, seen))
        load_config(Reads(merged, seen), env_file)
    return seen


def source_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "service").rglob("*.py"):
        if path.name in ("__init__.py", "variables.py"):
            continue
        text = path.read_text(encoding="utf-8")
        names.update(DIRECT_READ.findall(text))
        in_cli = path.name in ("cli.py", "demo.py") or path.parent.name == "ledger_cli"
        if path.parent.name == "config" or in_cli:
            names.update(NAME_LITERAL.findall(text))
    return names


def test_every_table_variable_is_documented_with_its_default_in_order() -> None:
    assert [(v.name, v.default) for v in VARIABLES] == page_rows()


def test_the_documented_reference_is_the_one_rendered_from_the_table() -> None:
    page = PAGE.read_text(encoding="utf-8")
    generated = page[page.index(BEGIN) + len(BEGIN) : page.index(END)]
    assert "\n\n" + markdown_reference() + "\n\n" == generated


def test_the_loaders_read_exactly_the_table_variables() -> None:
    assert {v.name for v in VARIABLES} == recorded_reads()


def test_every_variable_named_in_the_source_is_in_the_table() -> None:
    assert set() == source_names() - {v.name for v in VARIABLES}


def test_names_are_unique_and_every_group_is_used() -> None:
    names = [v.name for v in VARIABLES]
    assert len(names) == len(set(names))
    assert [g.key for g in GROUPS] == list(dict.fromkeys(v.group for v in VARIABLES))


def test_a_valid_configuration_resolves_every_variable() -> None:
    env = {"MAIL_USERNAME": "owner@example.com", "MAIL_PASSWORD": "pw", "HOME": "/home/o"}
    values = describe(load_config(env))
    assert [v.name for v in VARIABLES] == list(values)
    unresolved = [name for name, value in values.items() if "see Problems" in str(value)]
    assert [] == unresolved


def test_check_config_prints_each_variable_once_by_its_documented_name() -> None:
    lines = check_config_lines(load_config({"HOME": "/home/o"}))
    shown = [
        line.split(" = ", 1)[0].strip()
        for line in lines
        if " = " in line and not line.startswith(("  - ", "  # "))
    ]
    assert [v.name for v in VARIABLES] == shown


VALID = {"MAIL_USERNAME": "owner@example.com", "MAIL_PASSWORD": "pw", "HOME": "/home/o"}
WITH_MCP = {
    **VALID,
    "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
    "MCP_OAUTH_ISSUER": "https://login.example.com/",
    "MCP_OAUTH_JWKS_URL": "https://login.example.com/jwks",
    "MCP_ALLOWED_SUBJECTS": "owner-123",
}
LITERAL_DEFAULT = re.compile(r"`([^` ]+)`(?: \(.*\))?")


def documented_default(default: str) -> set[str] | None:
    """What check-config shows for a default written as one literal; None for prose."""
    literal = LITERAL_DEFAULT.fullmatch(default)
    if literal is not None and literal.group(1) not in BY_NAME:
        return {literal.group(1)}
    if default.startswith("unset") or default == "off":
        return {"unset", "off"}
    return {"none"} if default == "none" else None


def shown_values(env: dict[str, str]) -> dict[str, str]:
    lines = check_config_lines(load_config(env))
    pairs = (line.strip().split(" = ", 1) for line in lines if " = " in line)
    return {name: value.split(" (")[0] for name, value in pairs if name in BY_NAME}


def test_literal_defaults_are_what_check_config_shows_when_unset() -> None:
    shown = [(env, shown_values(env)) for env in (VALID, WITH_MCP)]
    checked = []
    for variable in VARIABLES:
        expected = documented_default(variable.default)
        if expected is None:
            continue
        seen = {values[variable.name] for env, values in shown if variable.name not in env}
        assert seen & expected, (variable.name, seen)
        checked.append(variable.name)
    assert len(checked) >= 50
