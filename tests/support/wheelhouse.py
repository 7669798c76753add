"""The offline wheelhouse scripts/bootstrap fills for tests/integration/test_installed_wheel.py.

It holds a wheel of every requirement pyproject.toml names (runtime and build), so that test
builds and installs angelos with `--no-index`. `python tests/support/wheelhouse.py requirements`
prints them one a line for bootstrap; `... stamp DIR` records them in DIR once it is filled.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
STAMP = "requirements.json"  # written last: its absence means an incomplete wheelhouse


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The project's runtime requirements, then its build requirements, as pyproject names them."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    runtime: list[str] = data["project"]["dependencies"]
    build: list[str] = data["build-system"]["requires"]
    return [*runtime, *build]


def stamped(wheelhouse: Path = WHEELHOUSE) -> list[str] | None:
    """The requirements the wheelhouse was filled for, or None when it is missing or unfinished."""
    stamp = wheelhouse / STAMP
    if not stamp.is_file():
        return None
    recorded: list[str] = json.loads(stamp.read_text(encoding="utf-8"))
    return recorded


def main(argv: list[str]) -> int:
    """Print the requirements, or stamp a filled wheelhouse with them."""
    if argv == ["requirements"]:
        print("\n".join(requirements()))
        return 0
    if len(argv) == 2 and argv[0] == "stamp":
        target = Path(argv[1]) / STAMP
        target.write_text(json.dumps(requirements(), indent=1) + "\n", encoding="utf-8")
        return 0
    print("usage: wheelhouse.py requirements | stamp DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
