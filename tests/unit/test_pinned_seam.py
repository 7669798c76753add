"""The test seam for pinned hosts stays a test seam: no product code calls it or reads a setting
that could, and what it does is only what the test tree asks for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from providers import netsafety

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("schemas", "providers", "ledger", "service")
CALL = re.compile(r"\breroute_for_tests\s*\(")


def test_no_product_module_calls_the_seam() -> None:
    callers = [
        str(path.relative_to(ROOT))
        for room in PRODUCT
        for path in (ROOT / room).rglob("*.py")
        if CALL.search(path.read_text(encoding="utf-8"))
        and path != ROOT / "providers" / "netsafety.py"
    ]
    assert callers == []


def test_the_seam_module_reads_no_environment() -> None:
    source = (ROOT / "providers" / "netsafety.py").read_text(encoding="utf-8")
    assert re.search(r"\bos\.environ\b|\bgetenv\b|import os\b", source) is None


async def test_a_fresh_process_reroutes_nothing() -> None:
    # pytest's own process may have run a rerouting test: look at a clean interpreter instead.
    import asyncio
    import sys

    probe = (
        "from providers import netsafety as n;"
        "print(any(n.rerouted(h, p) for h, p in [('imap.gmail.com', 993),"
        " ('smtp.gmail.com', 465), ('oauth2.googleapis.com', 443),"
        " ('outlook.office365.com', 993), ('smtp.office365.com', 587),"
        " ('login.microsoftonline.com', 443)]))"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert out.strip() == b"False"


def test_the_seam_reroutes_to_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        netsafety.reroute_for_tests({("imap.gmail.com", 993): ("10.0.0.1", 993)}, "/dev/null")
    assert not netsafety.rerouted("imap.gmail.com", 993)
