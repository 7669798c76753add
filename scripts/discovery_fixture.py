"""Print or rewrite fixtures/tools-list.json, the reviewed discovery snapshot.

Usage: python scripts/discovery_fixture.py [--write]
Rewrite it only for an intentional, reviewed discovery change; never to make a budget fit.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from schemas.discovery import compact_bytes, tool_entries

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "tools-list.json"


def main() -> int:
    """Write the fixture with --write, else print the byte counts."""
    entries = tool_entries()
    data = compact_bytes(entries) + b"\n"
    if "--write" in sys.argv:
        FIXTURE.write_bytes(data)
    schema_bytes = sum(len(compact_bytes(t["inputSchema"])) for t in entries)
    print(f"complete discovery: {len(data) - 1} bytes; input schemas: {schema_bytes} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
