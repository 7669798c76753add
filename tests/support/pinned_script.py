"""Run a script of scripts/ with the pinned provider hosts rerouted to this test run's listeners.

    python tests/support/pinned_script.py ROUTES.json -- scripts/graph-smoke --json

ROUTES.json is what tests/support/pinned_launch.py reads: {"ca_file": PATH, "routes": [[host,
port, "127.0.0.1", to_port], ...]}. The reroutes are installed in this process before the script
runs in it (runpy, as `__main__`), so the script itself never touches the seam.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> None:
    """Install the reroutes named by argv[0], then run the script and arguments after `--`."""
    sys.path.insert(0, str(ROOT))
    from providers.netsafety import reroute_for_tests

    plan = json.loads(Path(argv[0]).read_text())
    routes = {(host, port): (address, to) for host, port, address, to in plan["routes"]}
    reroute_for_tests(routes, plan["ca_file"])
    script, *rest = argv[argv.index("--") + 1 :]
    sys.argv = [script, *rest]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
