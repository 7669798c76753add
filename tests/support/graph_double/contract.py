"""msgraph-sdk as the double's referee: run tests/graph_sdk/check.py on recorded exchanges."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.graph_double.faults import Exchange

ROOT = Path(__file__).resolve().parents[3]
SDK_PYTHON = ROOT / "tests" / "graph_sdk" / "venv" / "bin" / "python"
CHECKER = ROOT / "tests" / "graph_sdk" / "check.py"
TIMEOUT = 120.0


class SdkUnavailable(RuntimeError):
    """The msgraph-sdk venv is not there (scripts/bootstrap makes it)."""


@dataclass(frozen=True)
class SdkReport:
    """What check.py found: one result per exchange, and how many shapes it checked."""

    results: list[dict[str, Any]]  # {"index", "ok", "problems"}
    responses_checked: int
    requests_checked: int
    ok: bool
    output: str

    def problems(self) -> list[str]:
        """Every problem, each prefixed with the index of its exchange."""
        return [f"#{r['index']}: {p}" for r in self.results for p in r["problems"]]


def check_against_sdk(exchanges: Sequence[Exchange], tmp_path: Path) -> SdkReport:
    """Write the exchanges as JSON lines under tmp_path and have msgraph-sdk check each one."""
    if not SDK_PYTHON.exists():
        raise SdkUnavailable(
            f"{SDK_PYTHON} is missing: run scripts/bootstrap (it installs msgraph-sdk from "
            "tests/graph_sdk/msgraph-requirements.txt into tests/graph_sdk/venv)"
        )
    lines = tmp_path / "graph-exchanges.jsonl"
    lines.write_text("".join(json.dumps(e.to_json()) + "\n" for e in exchanges), encoding="utf-8")
    done = subprocess.run(
        [str(SDK_PYTHON), str(CHECKER), str(lines)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    parsed = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summary = next((p for p in parsed if p.get("summary")), None)
    if summary is None or done.returncode not in (0, 1):
        raise RuntimeError(
            f"check.py failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return SdkReport(
        results=[p for p in parsed if "index" in p],
        responses_checked=summary["responses_checked"],
        requests_checked=summary["requests_checked"],
        ok=done.returncode == 0 and summary["ok"],
        output=done.stdout + done.stderr,
    )
