"""The store-fault scenarios, run concurrently: each has its own Redis, servers, namespace and
recipients (tests/faults/store_rig.py), so the whole table costs about as long as its longest
fault.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from faults.harness import ledger_cli
from faults.store_rig import Rig, Row, row_dict, with_fault
from msgspec import Struct

from support.fault_proxy import FaultProxy
from support.services import Services

Scenario = Callable[[Rig], Awaitable[None]]


async def crash(rig: Rig) -> None:
    """kill -9, restart 3 s later; the dispatcher waits a second, then leaves the verdict to
    its closer, so the closing events of this run are written after the restart."""
    async with rig.running(SEND_OUTCOME_PERSIST_WINDOW_S="1"):
        await with_fault(rig, rig.redis.kill, rig.redis.start, 3.0)


async def shutdown(rig: Rig) -> None:
    """SHUTDOWN, restart 3 s later."""
    async with rig.running():
        await with_fault(rig, rig.redis.shutdown, rig.redis.start, 3.0)


def pause(seconds: float) -> Scenario:
    """SIGSTOP for a while, then SIGCONT."""

    async def paused(rig: Rig) -> None:
        async with rig.running():
            await with_fault(rig, rig.redis.pause, rig.redis.resume, seconds)

    return paused


async def out_of_memory(rig: Rig) -> None:
    """Every write refused for 5 s (maxmemory 1, noeviction); closer as for the crash."""
    async with rig.running(SEND_OUTCOME_PERSIST_WINDOW_S="1"):
        await with_fault(rig, lambda: rig.redis.oom(True), lambda: rig.redis.oom(False), 5.0)


def network(mode: Callable[[FaultProxy], None], seconds: float) -> Scenario:
    """The proxy misbehaves for a while, then heals."""

    async def faulty(rig: Rig) -> None:
        async with rig.running():
            proxy = rig.proxy
            assert proxy is not None
            await with_fault(rig, lambda: mode(proxy), proxy.heal, seconds)

    return faulty


async def aof_off_then_crash(rig: Rig) -> None:
    """`appendonly no` at run time, a second storm, a crash, a restart on the old AOF."""
    # Readings 20 s apart (grace > 10 + 60 + 60): the second half is claimed and sent before the
    # servers read the store again, as it would be between two production refreshes.
    slow = {
        "SEND_DISPATCHER_LEASE_MS": "60000",
        "SEND_DISPATCHER_LEASE_REFRESH_MS": "20000",
        "SEND_RECOVERY_GRACE_S": "131",
    }
    async with rig.running(**slow):
        await rig.prepare_all()
        first, second = rig.sends[:30], rig.sends[30:]
        await rig.storm(first)
        await rig.wait_closed(time.monotonic())
        await asyncio.to_thread(rig.redis.config_set, "appendonly", "no")
        await rig.storm(second)  # not durable, and not yet known to be
        noticed = await until(lambda: all_health(rig, "AOF persistence is off"), 40)
        assert noticed, [health(rig, n)["sending"] for n in (0, 1)]
        await asyncio.to_thread(rig.redis.kill)
        await asyncio.to_thread(rig.redis.start)  # appendonly yes again: the old AOF loads
        await judge_rollback(rig, 30, time.monotonic())


async def older_aof(rig: Rig) -> None:
    """A restart from a copy of the AOF taken before the second storm."""
    async with rig.running():
        await rig.prepare_all()
        first, second = rig.sends[:30], rig.sends[30:]
        await rig.storm(first)
        await rig.wait_closed(time.monotonic())
        snapshot = await asyncio.to_thread(rig.redis.snapshot_aof)
        await rig.storm(second)
        await rig.wait_closed(time.monotonic())
        await asyncio.to_thread(rig.redis.shutdown)
        await asyncio.to_thread(rig.redis.restore_aof, snapshot)
        await asyncio.to_thread(rig.redis.start)
        await judge_rollback(rig, 30, time.monotonic())


async def judge_rollback(rig: Rig, before: int, back: float) -> None:
    """What the store forgot is quarantined, sending stays off until a person acknowledges,
    and nothing is ever sent twice, before or after."""
    halted = await until(lambda: all_health(rig, halted=True), 30)
    assert halted, [health(rig, n)["sending"] for n in (0, 1)]
    assert "went back in time" in health(rig)["sending"]["reason"]
    forgotten = rig.sends[before:]
    claimed = ("accepted", "rejected", "unknown")
    assert any(a in claimed for s in forgotten for a in s.answers)  # the loss was real
    rig.row.close_s = await rig.wait_closed(back)
    statuses = await rig.statuses()
    for send in forgotten:
        status = statuses[send.pid]
        assert ("unknown", "store_rollback") == (status["status"], status.get("stage")), status
    await rig.storm(rig.sends)  # halted: refused, or replays
    report = await rig.verify()
    assert {"rollback_halt"} == {f["kind"] for f in report["findings"]}, report["findings"]
    done = await asyncio.to_thread(ledger_cli, rig.cli_env(), "acknowledge-rollback")
    assert 0 == done.returncode, done.stdout + done.stderr
    resumed = await until(lambda: all_health(rig, ready=True), 30)
    assert resumed, [health(rig, n)["sending"] for n in (0, 1)]
    await rig.storm(rig.sends)  # sending is back on: still only replays
    await rig.verdict()
    assert (await rig.verify())["ok"]


SCENARIOS: dict[str, tuple[bool, Scenario]] = {  # name: (behind the proxy, scenario)
    "kill -9, restart after 3 s; persist window 1 s": (False, crash),
    "SHUTDOWN, restart after 3 s": (False, shutdown),
    "SIGSTOP 2 s": (False, pause(2.0)),
    "SIGSTOP 40 s": (False, pause(40.0)),
    "OOM 5 s; persist window 1 s": (False, out_of_memory),
    "proxy: reset after 512 bytes, 3 s": (True, network(lambda p: p.reset_after(512), 3.0)),
    "proxy: delay 1.5 s, 5 s": (True, network(lambda p: p.delay(1.5), 5.0)),
    "proxy: stall 12 s": (True, network(FaultProxy.stall, 12.0)),
    "proxy: blackhole 8 s": (True, network(FaultProxy.blackhole, 8.0)),
    "appendonly no, sends, crash, restart": (False, aof_off_then_crash),
    "restart from an older AOF": (False, older_aof),
}


class Outcome(Struct):
    """One scenario's row and, if it failed, why."""

    row: Row
    error: BaseException | None = None

    def check(self) -> None:
        """Fail the calling test the way the scenario failed."""
        if self.error is not None:
            raise self.error


async def run_all(services: Services, tmp: Path) -> dict[str, Outcome]:
    """Run every scenario at once; each one's outcome, by name."""
    rigs: dict[str, Rig] = {}
    for n, (name, (proxied, _)) in enumerate(SCENARIOS.items()):
        directory = tmp / f"fault-{n}"
        directory.mkdir()
        rigs[name] = Rig(services, directory, name, proxied=proxied)
    runs = {name: scenario(rigs[name]) for name, (_, scenario) in SCENARIOS.items()}
    return await gathered(rigs, runs, "store fault table")


async def gathered(
    rigs: dict[str, Rig], runs: dict[str, Awaitable[None]], title: str
) -> dict[str, Outcome]:
    """Run every scenario at once; print the table; each one's outcome, by name."""
    results = await asyncio.gather(*runs.values(), return_exceptions=True)
    outcomes = {
        name: Outcome(rigs[name].row, None if result is None else result)
        for name, result in zip(runs, results, strict=True)
    }
    print(f"{title}:")
    for outcome in outcomes.values():
        print(json.dumps(row_dict(outcome.row)))
    return outcomes


def health(rig: Rig, n: int = 0) -> dict[str, Any]:
    """One server's /healthz body."""
    with urllib.request.urlopen(f"{rig.servers[n].base}/healthz", timeout=5) as answer:
        body: dict[str, Any] = json.load(answer)
    return body


def all_health(rig: Rig, reason: str = "", *, halted: bool = False, ready: bool = False) -> bool:
    """Tell whether both servers' /healthz say so: a reason, a halt, or ready."""
    for n in (0, 1):
        sending = health(rig, n)["sending"]
        if reason not in sending["reason"] or (halted and not sending["ledger_halted"]):
            return False
        if ready and not sending["ready"]:
            return False
    return True


async def until(check: Callable[[], bool], within_s: float) -> bool:
    """Poll a blocking check (in a thread) until it holds or the time is up."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return True
        await asyncio.sleep(0.2)
    return False
