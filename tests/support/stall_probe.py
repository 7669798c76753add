"""The event-loop stall probe shared by bench/stall.py and tests/integration/test_stall.py.

One `angelos serve --transport http` process serves two MCP clients on loopback: a driver that
makes one heavy call at a time, and a pinger in its own process that calls `mail_query
capabilities` every 50 ms and reports when each ping was sent and answered. A ping waits
exactly as long as the server's event loop is held, so the worst ping latency that overlaps
a call is that call's stall. The pinger runs in a separate process so the driver's own work
(encoding multi-megabyte requests, validating large results) cannot delay it.

Run as a module (`python -m support.stall_probe URL`) this file is the pinger.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client

PING_INTERVAL_S = 0.05
# Work a call leaves behind (freeing buffers, logging) still counts against it.
SETTLE_S = 0.1
CAPABILITIES = {"action": "capabilities"}
TESTS = Path(__file__).resolve().parents[1]


def server_env(product_env: dict[str, str]) -> dict[str, str]:
    """The environment of the probed server: writes and sending on, a private ledger namespace."""
    return {
        **product_env,
        "MAIL_ENABLE_WRITES": "1",
        "MAIL_ENABLE_SEND": "1",
        "ANGELOS_LOCAL_SCOPES": "mail.read mail.write mail.send",
        "SEND_LEDGER_NAMESPACE": f"stall-{uuid.uuid4().hex[:8]}",
    }


@dataclass(frozen=True)
class Ping:
    """One capabilities call of the pinger: monotonic send and answer times, and success."""

    sent: float
    answered: float
    ok: bool

    @property
    def latency(self) -> float:
        """Return the round trip in seconds."""
        return self.answered - self.sent


class Pinger:
    """The pinger subprocess and the pings it reported so far."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.pings: list[Ping] = []
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, url: str) -> Pinger:
        """Start the pinger process against `url` and wait for its first answered ping."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "support.stall_probe", url,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        pinger = cls(proc)
        await pinger.wait_until(lambda: any(p.ok for p in pinger.pings), within=60)
        return pinger

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            sent, answered, ok = line.split()
            self.pings.append(Ping(float(sent), float(answered), ok == b"1"))

    async def wait_until(self, done: Callable[[], bool], within: float) -> None:
        """Wait until `done()` holds; fail when the pinger died or `within` seconds passed."""
        deadline = time.monotonic() + within
        while not done():
            if self.reader.done() or time.monotonic() > deadline:
                raise RuntimeError("the pinger stopped reporting")
            await asyncio.sleep(0.01)

    async def window(self, start: float, end: float, within: float = 600) -> list[Ping]:
        """Return the pings that overlap [start, end], once all of them were answered."""
        await self.wait_until(lambda: bool(self.pings) and self.pings[-1].sent > end, within)
        return [p for p in self.pings if p.sent < end and p.answered > start]

    async def stop(self) -> None:
        """Stop the pinger process."""
        if self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()
        await self.reader


@dataclass
class Outcome:
    """What one case measured: worst ping latency, the call's duration and its result code."""

    kind: str
    name: str
    code: str  # "ok" or the error code of the call
    expected: str
    call_s: float = 0.0
    worst_s: float = 0.0
    pings: int = 0
    failed_pings: int = 0

    @property
    def as_expected(self) -> bool:
        """Tell whether the call ended as the case expects (so it reached the code it probes)."""
        return self.code == self.expected


Arguments = Callable[[Client], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Case:
    """One probed call: its tool and arguments (built just before the call, setup allowed)."""

    kind: str
    name: str
    tool: str
    arguments: Arguments
    expected: str = "ok"
    heavy: bool = False  # the heaviest of its kind: the regression test runs these


def result_code(structured: dict[str, Any] | None, is_error: bool) -> str:
    """Return "ok" or the error code a tool result carries."""
    if not is_error:
        return "ok"
    return str((structured or {}).get("error_code") or "error")


async def measure(
    client: Client, pinger: Pinger, case: Case, runs: int = 1, limit_s: float | None = None
) -> Outcome:
    """Run `case` `runs` times through `client`; keep the worst stall and the longest call.

    With `limit_s`, a call (or the pings after it) taking longer raises TimeoutError.
    """
    outcome = Outcome(case.kind, case.name, "", case.expected)
    for _ in range(runs):
        arguments = await case.arguments(client)
        start = time.monotonic()
        try:
            async with asyncio.timeout(limit_s):
                result = await client.call_tool(case.tool, arguments)
        except TimeoutError:
            raise TimeoutError(f"{case.name}: no answer within {limit_s} s") from None
        end = time.monotonic()
        overlapping = await pinger.window(start, end + SETTLE_S, limit_s or 600)
        outcome.code = result_code(result.structured_content, result.is_error)
        outcome.call_s = max(outcome.call_s, end - start)
        outcome.pings += len(overlapping)
        outcome.failed_pings += sum(not p.ok for p in overlapping)
        outcome.worst_s = max([outcome.worst_s, *(p.latency for p in overlapping)])
    return outcome


async def baseline(pinger: Pinger, seconds: float = 2.0) -> tuple[float, float]:
    """Return the median and worst ping latency of an idle server over `seconds`."""
    start = time.monotonic()
    await asyncio.sleep(seconds)
    idle = await pinger.window(start, time.monotonic())
    latencies = [p.latency for p in idle]
    return statistics.median(latencies), max(latencies)


async def run_cases(
    url: str,
    cases: Sequence[Case],
    runs: int = 1,
    report: Callable[[Outcome], None] | None = None,
    limit_s: float | None = None,
) -> tuple[tuple[float, float], list[Outcome]]:
    """Measure every case against the server at `url`; return the idle baseline and outcomes."""
    pinger = await Pinger.start(url)
    try:
        idle = await baseline(pinger)
        outcomes = []
        async with Client(url) as client:
            for case in cases:
                outcome = await measure(client, pinger, case, runs, limit_s)
                outcomes.append(outcome)
                if report is not None:
                    report(outcome)
        return idle, outcomes
    finally:
        await pinger.stop()


async def ping_forever(url: str) -> None:
    """The pinger: capabilities every 50 ms, one line `sent answered ok` per ping on stdout."""
    parent = os.getppid()
    async with Client(url) as client:
        while os.getppid() == parent:  # stops by itself when the driver is gone
            sent = time.monotonic()
            try:
                result = await client.call_tool("mail_query", CAPABILITIES)
                ok = not result.is_error
            except Exception:  # a failed ping is reported, not fatal
                ok = False
            answered = time.monotonic()
            print(f"{sent:.6f} {answered:.6f} {int(ok)}", flush=True)
            await asyncio.sleep(max(0.0, sent + PING_INTERVAL_S - time.monotonic()))


if __name__ == "__main__":
    asyncio.run(ping_forever(sys.argv[1]))
