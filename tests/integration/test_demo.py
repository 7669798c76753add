"""`angelos demo` end to end, as `make demo` runs it: a clean terminal, the server's log in the
file it names, and the ledger's own commands on the message it sent."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from support.angelos_process import ROOT, angelos_command, clean_env
from support.services import Services

pytestmark = pytest.mark.services

SEND_EVENTS = [
    "prepared",
    "claimed",
    "smtp_attempt_started",
    "smtp_commit_point",
    "smtp_accepted",
    "duplicate_confirm",
]


def run_demo(services: Services, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run `angelos demo` with the services' environment, its temp files under `tmp_path`."""
    env = {
        **services.product_env,
        "SEND_LEDGER_NAMESPACE": f"demo-{uuid.uuid4().hex[:8]}",  # verify sees this run only
        "TMPDIR": str(tmp_path),
        **extra,
    }
    return subprocess.run(
        angelos_command("demo"), env=clean_env(env), cwd=ROOT,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def json_lines(text: str) -> list[str]:
    """The lines of `text` that are JSON objects (log records)."""
    found = []
    for line in text.splitlines():
        try:
            if isinstance(json.loads(line), dict):
                found.append(line)
        except ValueError:
            continue
    return found


def named_log(done: subprocess.CompletedProcess[str], tmp_path: Path) -> Path:
    """The log file the walk-through names at its start and at its end (the same one)."""
    named = re.findall(r"^server log: (\S+)", done.stdout, re.MULTILINE)
    assert 2 == len(named) and named[0] == named[-1], done.stdout
    path = Path(named[0])
    assert tmp_path in path.parents
    return path


def section(text: str, start: str, end: str) -> str:
    """The part of `text` from the line starting with `start` to the next `end`."""
    begin = text.index(start)
    return text[begin : text.index(end, begin + len(start))]


def test_the_walk_through_ends_with_the_ledger_of_its_send_and_logs_to_a_file(
    services: Services, tmp_path: Path
) -> None:
    done = run_demo(services, tmp_path, ANGELOS_DEMO_SEND="1")
    assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-2000:]
    assert [] == json_lines(done.stdout) and [] == json_lines(done.stderr)
    assert "" == done.stderr
    assert "Traceback" not in done.stdout

    records = [json.loads(line) for line in named_log(done, tmp_path).read_text().splitlines()]
    events = [record["event"] for record in records]
    assert "ledger_store_checked" in events
    assert 8 == events.count("tool_call")  # every tool call but the listing

    pid = re.findall(r"prepared ([0-9a-f]{32}), digest", done.stdout)[0]
    shown = section(done.stdout, f"$ angelos ledger show {pid}\n", "$ angelos ledger verify")
    assert f"prepared_id {pid}" in shown
    kinds = re.findall(r"^ +\d+ +\S+Z +(\w+) ", shown, re.MULTILINE)
    assert SEND_EVENTS == kinds
    assert "conclusion: the provider accepted the message" in shown

    verified = section(done.stdout, "$ angelos ledger verify\n", "== What next ==")
    assert "1 stream(s), 6 event(s), 6 index entr(ies)" in verified
    assert "verified: no findings" == verified.strip().splitlines()[-1].strip()
    assert done.stdout.rstrip().endswith("docs/deployment.md.")


def test_without_a_send_there_is_nothing_to_show_and_verify_still_runs(
    services: Services, tmp_path: Path
) -> None:
    done = run_demo(services, tmp_path)
    assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-2000:]
    assert [] == json_lines(done.stdout) and [] == json_lines(done.stderr)
    assert "nothing in the ledger to show: this run sent nothing" in done.stdout
    assert "angelos ledger show" not in done.stdout
    verified = section(done.stdout, "$ angelos ledger verify\n", "== What next ==")
    assert "0 stream(s), 0 event(s)" in verified
    assert "verified: no findings" == verified.strip().splitlines()[-1].strip()
    assert named_log(done, tmp_path).is_file()


def test_with_the_embedded_store_the_ledger_commands_read_what_the_server_wrote(
    services: Services, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    env = {k: v for k, v in services.product_env.items() if k != "ANGELOS_REDIS_URL"}
    done = subprocess.run(
        angelos_command("demo"),
        env=clean_env({**env, "ANGELOS_DATA_DIR": str(data_dir), "ANGELOS_DEMO_SEND": "1",
                       "TMPDIR": str(tmp_path)}),
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    # The server stops the embedded Redis it started once it is its only client.
    pidfile = data_dir / "redis" / "redis.pid"
    left = pidfile.read_text().strip() if pidfile.exists() else ""
    if left:  # the embedded store outlived its server: stop it before failing
        os.kill(int(left), signal.SIGTERM)
    assert "" == left
    assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-2000:]
    assert (data_dir / "redis" / "appendonly.aof").is_file()
    pid = re.findall(r"prepared ([0-9a-f]{32}), digest", done.stdout)[0]
    shown = section(done.stdout, f"$ angelos ledger show {pid}\n", "$ angelos ledger verify")
    assert SEND_EVENTS == re.findall(r"^ +\d+ +\S+Z +(\w+) ", shown, re.MULTILINE)
    verified = section(done.stdout, "$ angelos ledger verify\n", "== What next ==")
    assert "verified: no findings" == verified.strip().splitlines()[-1].strip()
