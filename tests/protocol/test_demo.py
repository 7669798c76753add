"""`angelos demo`: a readable walk through the mailbox over stdio, and the same as JSON lines."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from support.angelos_process import ROOT, angelos_command, clean_env
from support.services import Services

pytestmark = pytest.mark.services


def demo(services: Services, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **services.product_env,
        "ANGELOS_DEMO_SEND": "1",
        "SEND_LEDGER_NAMESPACE": f"demo-{uuid.uuid4().hex[:8]}",
        "TMPDIR": str(tmp_path),  # where the demo puts its log file
    }
    return subprocess.run(
        angelos_command("demo", *args), env=clean_env(env), cwd=ROOT,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_each_step_says_what_was_asked_what_came_back_and_what_it_shows(
    services: Services, tmp_path: Path
) -> None:
    done = demo(services, tmp_path)
    assert 0 == done.returncode, done.stderr[-2000:]
    # Steps 10 and 11, the ledger's own commands, print their output instead of an arrow line
    # (tests/integration/test_demo.py reads them).
    steps = re.findall(r"^ *(\d+)\. (.+) -> (.+)\n    (.+)$", done.stdout, re.MULTILINE)
    assert [str(n) for n in range(1, 10)] == [step[0] for step in steps]
    assert "confirm it with its digest" == steps[6][1] and "status accepted" == steps[6][2]
    assert ("confirm it again", "status accepted, resent false") == steps[8][1:3]


def test_json_gives_the_raw_results_one_per_line(services: Services, tmp_path: Path) -> None:
    done = demo(services, tmp_path, "--json")
    assert 0 == done.returncode, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert list(range(1, 12)) == [line["step"] for line in lines]
    assert False is lines[8]["result"]["resent"]
    pid = lines[5]["result"]["prepared_id"]
    shown, verified = lines[9], lines[10]
    assert f"angelos ledger show {pid}" == shown["asked"]
    assert (0, pid) == (shown["result"]["exit"], shown["result"]["output"]["pid"])
    assert "angelos ledger verify" == verified["asked"]
    assert (0, True) == (verified["result"]["exit"], verified["result"]["output"]["ok"])
