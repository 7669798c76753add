"""Run `angelos` with the pinned provider hosts rerouted to this test run's loopback listeners.

    python tests/support/pinned_launch.py ROUTES.json -- serve --transport stdio ...

ROUTES.json: {"ca_file": PATH, "routes": [["imap.gmail.com", 993, "127.0.0.1", PORT], ...]}.
This file lives only in the test tree: the product has no setting that reroutes a pinned host
(providers.netsafety.reroute_for_tests is a Python call), so nothing a user configures can turn
this on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    """Install the reroutes named by argv[0], then run the CLI with the rest after `--`."""
    sys.path.insert(0, str(ROOT))
    from providers.netsafety import reroute_for_tests
    from service.cli import main as angelos

    plan = json.loads(Path(argv[0]).read_text())
    routes = {(host, port): (address, to) for host, port, address, to in plan["routes"]}
    reroute_for_tests(routes, plan["ca_file"])
    rest = argv[argv.index("--") + 1 :]
    return angelos(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
