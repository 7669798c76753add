"""server.json and the bundle manifest against the configuration table, the registry's schema
and the README's ownership marker; nothing here runs the mcpb CLI (tests/integration does)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import msgspec
import pytest

from service.config.table.variables import BY_NAME, GROUPS, VARIABLES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "packaging" / "server.schema.json"
# sha256 of https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json as
# published (modelcontextprotocol/static, commit a9ba437d); see packaging/README.md.
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"


def _load_manifests() -> ModuleType:
    # Loaded by path: a top-level `packaging` package would shadow PyPI's `packaging`.
    spec = importlib.util.spec_from_file_location(
        "angelos_manifests", ROOT / "packaging" / "manifests.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


manifests = _load_manifests()


class EnvInput(msgspec.Struct, frozen=True, rename="camel"):
    """One environmentVariables entry as server.json spells it."""

    name: str
    description: str
    is_required: bool
    is_secret: bool
    format: str = "string"
    default: str | None = None
    choices: list[str] | None = None


class UserOption(msgspec.Struct, frozen=True):
    """One user_config entry of the bundle manifest."""

    type: str
    title: str
    description: str
    required: bool
    sensitive: bool


def _committed() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    return document


def _package() -> dict[str, Any]:
    (package,) = _committed()["packages"]
    assert isinstance(package, dict)
    return package


def _env_inputs() -> list[EnvInput]:
    return msgspec.convert(_package()["environmentVariables"], list[EnvInput])


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


class TestServerJson:
    def test_the_committed_file_is_what_the_table_generates(self) -> None:
        expected = manifests.render(manifests.server_json())
        assert expected == (ROOT / "server.json").read_text(encoding="utf-8"), (
            "run .venv/bin/python packaging/manifests.py --write"
        )

    def test_the_vendored_schema_is_the_published_2025_12_11_file(self) -> None:
        raw = SCHEMA_FILE.read_bytes()
        assert SCHEMA_SHA256 == hashlib.sha256(raw).hexdigest()
        assert manifests.SCHEMA_URL == json.loads(raw)["$id"] == _committed()["$schema"]

    def test_it_validates_against_the_registry_schema(self) -> None:
        schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
        validator = jsonschema.Draft7Validator(
            schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
        )
        assert [] == [error.message for error in validator.iter_errors(_committed())]

    def test_the_schema_check_catches_a_broken_entry(self) -> None:
        # The validation above can fail: a description over the schema's 100 characters does.
        schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
        broken = {**_committed(), "description": "x" * 101}
        assert not jsonschema.Draft7Validator(schema).is_valid(broken)

    def test_name_version_and_package_come_from_pyproject(self) -> None:
        project = _pyproject()["project"]
        document = _committed()
        package = _package()
        assert project["version"] == document["version"] == package["version"]
        assert project["description"] == document["description"]
        assert ("pypi", project["name"], "uvx") == (
            package["registryType"],
            package["identifier"],
            package["runtimeHint"],
        )
        # uvx runs the console script named like the package: `angelos serve --transport stdio`.
        assert "angelos" in project["scripts"]
        assert {"type": "stdio"} == package["transport"]
        words = [a.get("name", a.get("value")) for a in package["packageArguments"]]
        values = [a["value"] for a in package["packageArguments"]]
        assert ["serve", "--transport"] == words and ["serve", "stdio"] == values

    def test_every_variable_is_listed_or_left_out_for_a_stated_reason(self) -> None:
        listed = [entry.name for entry in _env_inputs()]
        expected = [v.name for v in VARIABLES if manifests.unlisted_reason(v) is None]
        assert expected == listed
        assert len(set(listed)) == len(listed)
        # What is left out exists in the table, so the list of reasons cannot go stale.
        assert set(manifests.UNLISTED_NAMES) <= set(BY_NAME)
        assert set(manifests.UNLISTED_GROUPS) <= {group.key for group in GROUPS}

    def test_every_secret_is_marked_secret_and_nothing_else(self) -> None:
        for entry in _env_inputs():
            assert BY_NAME[entry.name].secret == entry.is_secret, entry.name
        assert {"MAIL_PASSWORD", "ANGELOS_REDIS_URL", "GOOGLE_REFRESH_TOKEN"} <= {
            entry.name for entry in _env_inputs() if entry.is_secret
        }

    def test_only_the_username_is_always_required(self) -> None:
        assert ["MAIL_USERNAME"] == [entry.name for entry in _env_inputs() if entry.is_required]

    def test_every_default_reads_back_as_the_tables_default(self) -> None:
        defaults = {entry.name: entry.default for entry in _env_inputs() if entry.default}
        for name, raw in defaults.items():
            variable = BY_NAME[name]
            assert (variable.unset, None) == variable.check.parse(raw), name
        # A variable with a default value publishes it; one without a value publishes none.
        with_value = {
            entry.name for entry in _env_inputs() if BY_NAME[entry.name].unset not in (None, ())
        }
        assert with_value == set(defaults)
        some = ("MAIL_PROVIDER", "IMAP_PORT", "MAIL_TIMEOUT", "MAIL_ENABLE_SEND")
        assert ["spacemail", "993", "30s", "0"] == [defaults[name] for name in some]
        assert "mail.read" == defaults["ANGELOS_LOCAL_SCOPES"]

    def test_every_offered_choice_is_accepted_and_switches_offer_1_not_true(self) -> None:
        for entry in _env_inputs():
            for value in entry.choices or ():
                _, problem = BY_NAME[entry.name].check.parse(value)
                assert problem is None, (entry.name, value)
        switches = {e.name: e.choices for e in _env_inputs() if e.name.startswith("MAIL_ENABLE_")}
        assert {name: ["0", "1"] for name in switches} == switches

    def test_the_remote_is_a_host_the_owner_fills_in(self) -> None:
        (remote,) = _committed()["remotes"]
        assert "streamable-http" == remote["type"]
        assert remote["url"].startswith("https://") and remote["url"].endswith("/mcp")
        assert (
            set(re.findall(r"\{([^}]+)\}", remote["url"])) == set(remote["variables"]) == {"host"}
        )
        assert remote["variables"]["host"]["isRequired"] is True


class TestReadmeMarker:
    def test_the_readme_names_the_server_once_as_pypi_expects(self) -> None:
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        assert ["mcp-name: " + manifests.SERVER_NAME] == re.findall(r"mcp-name: [^\s<>]+", readme)
        # The registry wants the name to end there (a space, a newline, `<` or `-->`).
        assert f"<!-- mcp-name: {manifests.SERVER_NAME} -->" in readme
        assert manifests.SERVER_NAME == _committed()["name"]

    def test_the_readme_is_the_packages_long_description(self) -> None:
        assert "README.md" == _pyproject()["project"]["readme"]


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    document: dict[str, Any] = manifests.bundle_manifest()
    return document


class TestBundleManifest:
    def test_each_setting_is_one_table_variable_passed_by_its_own_key(
        self, manifest: dict[str, Any]
    ) -> None:
        env = manifest["server"]["mcp_config"]["env"]
        options = manifest["user_config"]
        assert set(env) <= set(BY_NAME)
        assert {name.lower(): "${user_config." + name.lower() + "}" for name in env} == {
            name.lower(): value for name, value in env.items()
        }
        assert set(options) == {name.lower() for name in env}

    def test_every_sensitive_setting_is_marked_sensitive(self, manifest: dict[str, Any]) -> None:
        options = msgspec.convert(manifest["user_config"], dict[str, UserOption])
        for name in manifest["server"]["mcp_config"]["env"]:
            assert BY_NAME[name].secret == options[name.lower()].sensitive, name
        assert {"mail_password", "google_refresh_token", "microsoft_refresh_token"} <= {
            key for key, option in options.items() if option.sensitive
        }

    def test_it_asks_for_the_mailbox_and_needs_only_the_username(
        self, manifest: dict[str, Any]
    ) -> None:
        options = msgspec.convert(manifest["user_config"], dict[str, UserOption])
        mailbox = {"mail_provider", "mail_username", "mail_password", "mail_from", "imap_host"}
        assert mailbox | {"imap_port", "smtp_host", "smtp_port", "smtp_tls_mode"} <= set(options)
        assert ["mail_username"] == [key for key, option in options.items() if option.required]
        # No defaults: a default would be a set variable, which wins over the env file.
        assert all("default" not in option for option in manifest["user_config"].values())
        assert "file" == options["angelos_env_file"].type

    def test_it_runs_on_the_embedded_store(self, manifest: dict[str, Any]) -> None:
        server = manifest["server"]
        assert "ANGELOS_REDIS_URL" not in server["mcp_config"]["env"]
        assert ("uv", "server/main.py") == (server["type"], server["entry_point"])
        config = server["mcp_config"]
        assert "uv" == config["command"]
        assert ["run", "--quiet", "--directory", "${__dirname}", server["entry_point"]] == (
            config["args"]
        )

    def test_the_description_accounts_for_every_variable_left_out(
        self, manifest: dict[str, Any]
    ) -> None:
        asked = set(manifest["server"]["mcp_config"]["env"])
        told = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", manifests.left_out()))
        assert {v.name for v in VARIABLES} - asked == told
