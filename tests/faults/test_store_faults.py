"""The store fails, not angelos: Redis crashes, stops, pauses, runs out of memory, loses its
network, or comes back older than it was. Two server processes on one private Redis take a storm
of concurrent confirms through each fault (tests/faults/store_faults.py says what is judged).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from faults.harness import ledger_cli
from faults.store_faults import Rig, with_fault

from support.services import Services

pytestmark = pytest.mark.services


@pytest.fixture
def rig_for(services: Services, tmp_path: Path) -> Any:
    def make(fault: str, *, proxied: bool = False) -> Rig:
        return Rig(services, tmp_path, fault, proxied=proxied)

    return make


class TestRedisProcessFaults:
    async def test_a_crash_and_a_restart_from_the_aof_send_nothing_twice(
        self, rig_for: Any
    ) -> None:
        rig = rig_for("kill -9, restart after 3 s; persist window 1 s")
        # The dispatcher waits for the store only a second before it leaves the verdict to its
        # closer: the closing events of this run are written after the restart.
        with rig.running(SEND_OUTCOME_PERSIST_WINDOW_S="1"):
            await with_fault(rig, rig.redis.kill, rig.redis.start, 3.0)

    async def test_a_clean_shutdown_and_a_restart_send_nothing_twice(self, rig_for: Any) -> None:
        rig = rig_for("SHUTDOWN, restart after 3 s")
        with rig.running():
            await with_fault(rig, rig.redis.shutdown, rig.redis.start, 3.0)

    async def test_a_two_second_pause_sends_nothing_twice(self, rig_for: Any) -> None:
        rig = rig_for("SIGSTOP 2 s")
        with rig.running():
            await with_fault(rig, rig.redis.pause, rig.redis.resume, 2.0)

    async def test_a_forty_second_pause_sends_nothing_twice(self, rig_for: Any) -> None:
        rig = rig_for("SIGSTOP 40 s")
        with rig.running():
            await with_fault(rig, rig.redis.pause, rig.redis.resume, 40.0)

    async def test_five_seconds_out_of_memory_send_nothing_twice(self, rig_for: Any) -> None:
        rig = rig_for("OOM 5 s; persist window 1 s")
        with rig.running(SEND_OUTCOME_PERSIST_WINDOW_S="1"):
            await with_fault(rig, lambda: rig.redis.oom(True), lambda: rig.redis.oom(False), 5.0)


class TestNetworkFaults:
    async def test_connections_reset_after_a_few_bytes(self, rig_for: Any) -> None:
        rig = rig_for("proxy: reset after 512 bytes, 3 s", proxied=True)
        with rig.running():
            proxy = rig.proxy
            assert proxy is not None
            await with_fault(rig, lambda: proxy.reset_after(512), proxy.heal, 3.0)

    async def test_replies_delayed_by_one_and_a_half_seconds(self, rig_for: Any) -> None:
        rig = rig_for("proxy: delay 1.5 s, 5 s", proxied=True)
        with rig.running():
            proxy = rig.proxy
            assert proxy is not None
            await with_fault(rig, lambda: proxy.delay(1.5), proxy.heal, 5.0)

    async def test_a_twelve_second_stall(self, rig_for: Any) -> None:
        rig = rig_for("proxy: stall 12 s", proxied=True)
        with rig.running():
            proxy = rig.proxy
            assert proxy is not None
            await with_fault(rig, proxy.stall, proxy.heal, 12.0)

    async def test_an_eight_second_blackhole(self, rig_for: Any) -> None:
        rig = rig_for("proxy: blackhole 8 s", proxied=True)
        with rig.running():
            proxy = rig.proxy
            assert proxy is not None
            await with_fault(rig, proxy.blackhole, proxy.heal, 8.0)


def health(rig: Rig, n: int = 0) -> dict[str, Any]:
    """One server's /healthz body."""
    with urllib.request.urlopen(f"{rig.servers[n].base}/healthz", timeout=5) as answer:
        body: dict[str, Any] = json.load(answer)
    return body


def all_say_off(rig: Rig) -> bool:
    """Tell whether both servers report sending off because AOF is off."""
    return all(
        "AOF persistence is off" in health(rig, n)["sending"]["reason"] for n in (0, 1)
    )


def all_say(rig: Rig, flag: str) -> bool:
    """Tell whether both servers' /healthz show this `sending` flag."""
    return all(health(rig, n)["sending"][flag] for n in (0, 1))


async def until(check: Any, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return True
        await asyncio.sleep(0.1)
    return False


class TestAStoreThatGoesBackInTime:
    """The store comes back older than it was: what it forgot is never sent again."""

    async def judge_rollback(self, rig: Rig, before: int) -> None:
        halted = await until(lambda: all_say(rig, "ledger_halted"), 30)
        assert halted, [health(rig, n)["sending"] for n in (0, 1)]
        assert "went back in time" in health(rig)["sending"]["reason"]
        forgotten = rig.sends[before:]
        claimed = ("accepted", "rejected", "unknown")
        assert any(a in claimed for s in forgotten for a in s.answers)  # the loss was real
        await rig.wait_closed(time.monotonic())
        statuses = await rig.statuses()
        for send in forgotten:
            assert ("unknown", "store_rollback") == (
                statuses[send.pid]["status"], statuses[send.pid].get("stage")
            ), statuses[send.pid]
        await rig.storm(rig.sends)  # halted: refused, or replays
        report = rig.verify()
        assert {"rollback_halt"} == {f["kind"] for f in report["findings"]}, report["findings"]
        done = ledger_cli(rig.cli_env(), "acknowledge-rollback")
        assert 0 == done.returncode, done.stdout + done.stderr
        resumed = await until(lambda: all_say(rig, "ready"), 30)
        assert resumed, [health(rig, n)["sending"] for n in (0, 1)]
        await rig.storm(rig.sends)  # sending is back on: still only replays
        await rig.verdict()
        assert rig.verify()["ok"]

    async def test_aof_switched_off_then_a_crash_never_resends_what_was_forgotten(
        self, rig_for: Any
    ) -> None:
        rig = rig_for("appendonly no, sends, crash, restart")
        # Readings 20 s apart (grace > 6 + 60 + 60): the second half is claimed and sent before
        # the servers read the store again, as it would be between two production refreshes.
        slow = {
            "SEND_DISPATCHER_LEASE_MS": "60000",
            "SEND_DISPATCHER_LEASE_REFRESH_MS": "20000",
            "SEND_RECOVERY_GRACE_S": "127",
        }
        with rig.running(**slow):
            await rig.prepare_all()
            first, second = rig.sends[:30], rig.sends[30:]
            await rig.storm(first)
            await rig.wait_closed(time.monotonic())
            await asyncio.to_thread(rig.redis.config_set, "appendonly", "no")
            await rig.storm(second)  # not durable, and not yet known to be
            noticed = await until(lambda: all_say_off(rig), 30)
            assert noticed, [health(rig, n)["sending"] for n in (0, 1)]
            await asyncio.to_thread(rig.redis.kill)
            await asyncio.to_thread(rig.redis.start)  # appendonly yes again: the old AOF loads
            await self.judge_rollback(rig, 30)

    async def test_a_restart_from_an_older_aof_never_resends_what_was_forgotten(
        self, rig_for: Any
    ) -> None:
        rig = rig_for("restart from an older AOF")
        with rig.running():
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
            await self.judge_rollback(rig, 30)
