"""Check or rewrite the variable reference in docs/configuration.md.

Usage: python scripts/config_reference.py [--write]
The reference is rendered from service/config/table/variables.py; change the table there, then run
this with --write. Without it, exit 1 when the page is out of date.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.config.table.reference import replace_reference  # noqa: E402

PAGE = ROOT / "docs" / "configuration.md"


def main() -> int:
    """Rewrite the page with --write, else report whether it is current."""
    page = PAGE.read_text(encoding="utf-8")
    current = replace_reference(page)
    if "--write" in sys.argv:
        PAGE.write_text(current, encoding="utf-8")
        return 0
    if current != page:
        print(f"{PAGE.relative_to(ROOT)} is out of date: run {sys.argv[0]} --write")
        return 1
    print(f"{PAGE.relative_to(ROOT)} is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
