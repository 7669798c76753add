"""Run angelos (or a script) in a subprocess whose pinned hosts reach this test's listeners.

The routes are written to a ROUTES.json that the test tree's launchers read (pinned_launch.py
for the CLI, pinned_script.py for a script); the product has no setting that does this.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Mapping, Sequence

from support.angelos_process import ROOT
from support.services import Services

CLI = ROOT / "tests" / "support" / "pinned_launch.py"
SCRIPT = ROOT / "tests" / "support" / "pinned_script.py"
Route = tuple[str, int, int]  # pinned host, its port, the loopback port it reaches here


async def run_pinned(
    services: Services,
    routes: Sequence[Route],
    env: Mapping[str, str],
    *args: str,
    launcher: str = str(CLI),
) -> tuple[int, str, str]:
    """Run the launcher with `args` (after `--`); its exit status, stdout and stderr."""
    plan = services.dir / f"routes-{uuid.uuid4().hex[:8]}.json"
    listed = [[host, port, "127.0.0.1", to] for host, port, to in routes]
    plan.write_text(json.dumps({"ca_file": str(services.ca_file), "routes": listed}))
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, launcher, str(plan), "--", *args),
        env={"PATH": "/usr/bin:/bin", "HOME": str(services.dir), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
