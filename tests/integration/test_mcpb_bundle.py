"""scripts/build-mcpb end to end: the official mcpb CLI validates and packs the bundle, and the
packed entry point starts angelos the way the manifest's mcp_config says.

The one step not taken as Claude Desktop would is `uv run --directory <bundle>`, which installs
angelos from PyPI: the tests run the bundle's entry point with this checkout's .venv instead, so
no test needs the network. Everything else (the manifest's env block with user_config values
substituted, unfilled fields passed as their literal placeholder) is the host's behaviour.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import msgspec
import pytest

from support.angelos_process import ROOT
from support.third_party import CLIENTS, NODE

BUILD = ROOT / "scripts" / "build-mcpb"
CLI = CLIENTS / "node_modules" / "@anthropic-ai" / "mcpb" / "dist" / "cli" / "cli.js"
PINNED = json.loads((CLIENTS / "package.json").read_text(encoding="utf-8"))["dependencies"][
    "@anthropic-ai/mcpb"
]
PLACEHOLDER = re.compile(r"\$\{user_config\.([a-z0-9_]+)\}")


class Built(msgspec.Struct, frozen=True):
    """One run of scripts/build-mcpb into a directory of its own."""

    returncode: int
    output: str
    bundle: Path
    unpacked: Path
    manifest: dict[str, Any]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    missing = [str(p) for p in (NODE, CLI) if not p.exists()]
    if missing:
        pytest.skip(f"run scripts/bootstrap first: missing {', '.join(missing)}")
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [str(BUILD), "--out-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    version = _version()
    bundle = out / f"angelos-{version}.mcpb"
    unpacked = tmp_path_factory.mktemp("unpacked")
    manifest: dict[str, Any] = {}
    if bundle.exists():
        with zipfile.ZipFile(bundle) as archive:
            archive.extractall(unpacked)
        manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    return Built(run.returncode, run.stdout + run.stderr, bundle, unpacked, manifest)


def _version() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version = "([^"]+)"$', text, re.MULTILINE)
    assert match is not None
    return match.group(1)


def _host_env(manifest: dict[str, Any], filled: Mapping[str, str], home: Path) -> dict[str, str]:
    """The server's environment as the host makes it: each `${user_config.KEY}` of the env
    block replaced by the user's value, or left as written when the field stayed blank."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    for name, template in manifest["server"]["mcp_config"]["env"].items():
        match = PLACEHOLDER.fullmatch(template)
        assert match is not None, (name, template)
        key = match.group(1)
        assert key in manifest["user_config"], key
        env[name] = filled.get(key, template)
    return env


def _start(built: Built, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Run the entry point as mcp_config says (`uv run --directory <bundle> <entry_point>`),
    with .venv's Python in uv's place; initialize, then list the tools if that worked.

    Returns the replies: the initialize reply, and the tools/list reply after a success.
    """
    server = built.manifest["server"]
    assert ["run", "--quiet", "--directory", "${__dirname}", server["entry_point"]] == (
        server["mcp_config"]["args"]
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bundle-test", "version": "0"},
        },
    }
    proc = subprocess.Popen(
        [sys.executable, str(built.unpacked / server["entry_point"])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(env),
        cwd=built.unpacked,
    )
    # A hung server is killed, which ends the blocking reads below with EOF.
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    assert proc.stdin is not None and proc.stdout is not None
    try:
        replies = [_exchange(proc.stdin, proc.stdout, initialize)]
        if "result" in replies[0]:
            notify = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            proc.stdin.write(json.dumps(notify) + "\n")
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            replies.append(_exchange(proc.stdin, proc.stdout, listing))
        proc.stdin.close()  # end of input: angelos stops
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return replies


def _exchange(stdin: IO[str], stdout: IO[str], request: dict[str, Any]) -> dict[str, Any]:
    """Send one request line and read one reply line."""
    stdin.write(json.dumps(request) + "\n")
    stdin.flush()
    line = stdout.readline()
    assert line, f"no reply to {request['method']}"
    reply: dict[str, Any] = json.loads(line)
    return reply


MAILBOX = {
    "mail_provider": "custom",
    "mail_username": "owner@example.org",
    "mail_password": "correct horse battery staple",
    "imap_host": "imap.example.org",
    "smtp_host": "smtp.example.org",
}


class TestBuild:
    def test_the_cli_validates_and_packs_the_bundle(self, built: Built) -> None:
        assert 0 == built.returncode, built.output
        # Once by `mcpb validate`, once more by `mcpb pack` before it writes the archive.
        assert 2 == built.output.count("Manifest schema validation passes!"), built.output
        assert f"Output: {built.bundle}" in built.output
        assert f"build-mcpb: wrote {built.bundle}" in built.output

    def test_the_cli_is_the_pinned_version(self) -> None:
        if not NODE.exists() or not CLI.exists():
            pytest.skip("run scripts/bootstrap first")
        run = subprocess.run(
            [str(NODE), str(CLI), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert re.fullmatch(r"\d+\.\d+\.\d+", PINNED)
        assert PINNED == run.stdout.strip()

    def test_the_bundle_is_a_zip_of_the_manifest_project_and_entry_point(
        self, built: Built
    ) -> None:
        with zipfile.ZipFile(built.bundle) as archive:
            assert archive.testzip() is None
            names = sorted(archive.namelist())
        assert ["manifest.json", "pyproject.toml", "server/main.py"] == names
        project = (built.unpacked / "pyproject.toml").read_text(encoding="utf-8")
        assert f'dependencies = ["angelos=={_version()}"]' in project

    def test_the_manifest_reads_back_as_a_uv_server_for_this_release(self, built: Built) -> None:
        manifest = built.manifest
        assert ("0.4", "angelos", _version()) == (
            manifest["manifest_version"],
            manifest["name"],
            manifest["version"],
        )
        assert ("uv", "server/main.py", "uv") == (
            manifest["server"]["type"],
            manifest["server"]["entry_point"],
            manifest["server"]["mcp_config"]["command"],
        )
        assert "ANGELOS_REDIS_URL" not in manifest["server"]["mcp_config"]["env"]
        assert manifest["user_config"]["mail_password"]["sensitive"] is True

    def test_a_missing_out_dir_value_is_a_usage_error(self) -> None:
        run = subprocess.run(
            [str(BUILD), "--out-dir"], capture_output=True, text=True, timeout=30, check=False
        )
        assert 2 == run.returncode and run.stderr.startswith("usage: scripts/build-mcpb")


class TestStartingTheBundle:
    def test_blank_optional_fields_start_angelos_on_the_embedded_store(
        self, built: Built, tmp_path: Path
    ) -> None:
        # Every optional field but the mailbox's stays blank, so it arrives as its placeholder.
        replies = _start(built, _host_env(built.manifest, MAILBOX, tmp_path))
        assert [1, 2] == [reply.get("id") for reply in replies], replies
        info = replies[0]["result"]["serverInfo"]
        assert {"name": "angelos", "version": _version()} == info
        tools = [tool["name"] for tool in replies[1]["result"]["tools"]]
        assert [t["name"] for t in built.manifest["tools"]] == sorted(tools)
        # The ledger went to the embedded store under the default data directory.
        assert (tmp_path / ".local" / "share" / "angelos" / "redis").is_dir()

    def test_a_blank_password_is_unset_rather_than_taken_literally(
        self, built: Built, tmp_path: Path
    ) -> None:
        without = {k: v for k, v in MAILBOX.items() if k != "mail_password"}
        (reply,) = _start(built, _host_env(built.manifest, without, tmp_path))
        assert ["MAIL_PASSWORD: required for password login"] == reply["error"]["data"]["problems"]

    def test_the_env_file_fills_what_the_fields_leave_blank(
        self, built: Built, tmp_path: Path
    ) -> None:
        env_file = tmp_path / "angelos.env"
        env_file.write_text("MAIL_PASSWORD='from the file'\nMAIL_ENABLE_SEND=1\n")
        env_file.chmod(0o600)
        fields = {k: v for k, v in MAILBOX.items() if k != "mail_password"}
        fields["angelos_env_file"] = str(env_file)
        data_dir = tmp_path / "data"
        fields["angelos_data_dir"] = str(data_dir)
        replies = _start(built, _host_env(built.manifest, fields, tmp_path))
        assert "angelos" == replies[0]["result"]["serverInfo"]["name"], replies
        assert (data_dir / "redis").is_dir()
