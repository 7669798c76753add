"""What one inbound message at the size limit costs the event loop, per shape of JSON.

Run:  .venv/bin/python bench/wire_parse.py
Each message is a tools/call of exactly MAX_MESSAGE_BYTES (8 MiB) whose arguments hold one
shape: a single big string (the legitimate case: base64 attachments), or millions of tiny values
(ints, objects, arrays, strings, floats), 4,300-digit integers, or escapes. Printed side by side,
best of three: our screen() (which refuses what is too costly before parsing), the SDK's own
parse of the same line as it would run without the screen, and the SDK's parse of what the screen
lets through. Also a message just under the value limit with the most expensive values allowed.
Each figure is one synchronous call, so it is how long the loop is held.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from service.transports.jsonrpc_edge import (  # noqa: E402
    MAX_MESSAGE_BYTES,
    MAX_VALUES,
    Accepted,
    screen,
)

HEAD = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"mail_prepare","arguments":{"x":'
)
TAIL = b"}}}"
ROOM = MAX_MESSAGE_BYTES - len(HEAD) - len(TAIL)


def filled(unit: bytes, count: int | None = None) -> bytes:
    """An array of `unit` repeated to fill the message (or `count` times)."""
    n = count if count is not None else (ROOM - 2) // (len(unit) + 1)
    return b"[" + b",".join([unit] * n) + b"]"


def shapes() -> dict[str, bytes]:
    """Arguments payloads, each filling the message to the limit."""
    digits = b"9" * 4300  # the most digits either parser accepts
    few = MAX_VALUES - 20
    return {
        "one string": b'"' + b"A" * (ROOM - 2) + b'"',
        "ints": filled(b"0"),
        "objects": filled(b"{}"),
        "arrays": filled(b"[]"),
        "strings": filled(b'""'),
        "floats": filled(b"1.5"),
        "4300-digit ints": filled(digits),
        "escapes": b'"' + b"\\u0001" * ((ROOM - 2) // 6) + b'"',
        f"{few} strings": filled(b'"' + b"B" * ((ROOM - 2) // few - 3) + b'"', few),
        f"{few} 4300-digit ints": filled(digits, min(few, (ROOM - 2) // (len(digits) + 1))),
    }


def best_ms(call: Callable[[], Any]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def sdk_parse(line: str) -> None:
    with contextlib.suppress(ValueError):
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)


def main() -> None:
    print(f"message size {MAX_MESSAGE_BYTES / 2**20:.0f} MiB, value limit {MAX_VALUES}")
    print(f"{'shape':28} {'screen':>9}  {'verdict':34} {'SDK parse':>10}  {'SDK after screen':>16}")
    for name, payload in shapes().items():
        raw = HEAD + payload + TAIL
        assert len(raw) <= MAX_MESSAGE_BYTES, (name, len(raw))
        verdict = screen(raw)
        screen_ms = best_ms(lambda raw=raw: screen(raw))
        text = raw.decode()
        sdk_ms = best_ms(lambda text=text: sdk_parse(text))
        if isinstance(verdict, Accepted):
            label, after = "accepted", f"{sdk_ms:13.1f} ms"
        else:
            label, after = f"{verdict.code} {verdict.message[13:][:28]}", f"{'never runs':>16}"
        print(f"{name:28} {screen_ms:6.1f} ms  {label:34} {sdk_ms:7.1f} ms  {after}")


if __name__ == "__main__":
    main()
