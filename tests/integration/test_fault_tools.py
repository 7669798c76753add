"""The Redis fault tools do what they claim: FaultProxy's modes seen by redis-py clients through
the proxy, and ControlledRedis's crash, stop, pause, OOM, config and AOF rollback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from support.fault_proxy import FaultProxy
from support.redis_control import ControlledRedis, controlled_redis

SHORT = 0.3  # a client timeout for commands that must not be answered


def client(port: int, timeout: float | None = None) -> aioredis.Redis:
    """A redis-py asyncio client without retries, so each fault surfaces at once."""
    return aioredis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControlledRedis]:
    with controlled_redis(tmp_path / "redis") as redis_server:
        yield redis_server


@pytest.fixture
def proxy(server: ControlledRedis) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", server.port) as fault_proxy:
        yield fault_proxy


@pytest.fixture
async def direct(server: ControlledRedis) -> AsyncIterator[aioredis.Redis]:
    async with client(server.port) as redis_client:
        yield redis_client


async def not_done_after(pending: asyncio.Future[Any], seconds: float) -> bool:
    """Whether the command is still unanswered after waiting that long."""
    done, _ = await asyncio.wait({pending}, timeout=seconds)
    return not done


class TestFaultProxy:
    async def test_heal_forwards_commands_and_counts_the_connection(
        self, proxy: FaultProxy
    ) -> None:
        async with client(proxy.port) as through:
            assert await through.set("k", "v")
            assert "v" == await through.get("k")
        assert 1 == proxy.connections

    async def test_reset_after_n_bytes_fails_the_command_and_after_heal_a_new_connection_works(
        self, proxy: FaultProxy, direct: aioredis.Redis
    ) -> None:
        async with client(proxy.port) as through:
            assert await through.ping()
            proxy.reset_after(10)
            with pytest.raises(RedisConnectionError):
                await through.set("k", "v" * 100)
            assert 1 == proxy.resets
            assert None is await direct.get("k")  # Redis got 10 bytes of the SET, not a command
            proxy.heal()
            async with client(proxy.port) as fresh:
                assert await fresh.ping()
            assert await through.ping()  # the pool reconnects

    async def test_reset_after_zero_resets_idle_connections_and_each_new_one(
        self, proxy: FaultProxy
    ) -> None:
        async with client(proxy.port) as idle, client(proxy.port) as fresh:
            assert await idle.ping()
            proxy.reset_after(0)
            assert 1 == proxy.resets
            with pytest.raises(RedisConnectionError):
                await idle.ping()
            with pytest.raises(RedisConnectionError):
                await fresh.ping()
            assert 2 == proxy.resets

    async def test_delay_holds_each_chunk_that_long_in_each_direction(
        self, proxy: FaultProxy
    ) -> None:
        async with client(proxy.port) as through:
            assert await through.ping()
            proxy.delay(0.5)
            started = time.monotonic()
            assert await through.ping()
            elapsed = time.monotonic() - started
        assert 2 * 0.5 <= elapsed + 0.001  # the request and the reply were each held 0.5 s

    async def test_stall_holds_a_command_until_heal_then_delivers_it(
        self, proxy: FaultProxy, direct: aioredis.Redis
    ) -> None:
        async with client(proxy.port) as through:
            assert await through.ping()
            proxy.stall()
            pending = asyncio.ensure_future(through.set("k", "v"))
            assert await not_done_after(pending, SHORT)
            assert None is await direct.get("k")  # held by the proxy, not yet at Redis
            proxy.heal()
            assert await pending
        assert "v" == await direct.get("k")

    async def test_blackhole_drops_a_command_for_good_and_after_heal_a_new_connection_works(
        self, proxy: FaultProxy, direct: aioredis.Redis
    ) -> None:
        async with client(proxy.port, timeout=SHORT) as through:
            assert await through.ping()
            proxy.blackhole()
            with pytest.raises(RedisTimeoutError):
                await through.set("k", "v")
            async with client(proxy.port, timeout=SHORT) as during:
                with pytest.raises(RedisTimeoutError):
                    await during.ping()  # accepted, but its handshake goes nowhere
            proxy.heal()
            async with client(proxy.port, timeout=SHORT) as after:
                assert await after.ping()
        assert None is await direct.get("k")  # dropped, not delivered late
        assert 3 == proxy.connections

    @pytest.mark.parametrize("mode", ["stall", "blackhole"])
    async def test_closing_the_proxy_ends_its_held_connections(
        self, server: ControlledRedis, mode: str
    ) -> None:
        fault_proxy = FaultProxy("127.0.0.1", server.port)
        fault_proxy.start()
        try:
            async with client(fault_proxy.port) as through:
                assert await through.ping()
                getattr(fault_proxy, mode)()
                pending = asyncio.ensure_future(through.ping())
                assert await not_done_after(pending, SHORT)
                fault_proxy.close()
                with pytest.raises(RedisConnectionError):  # no client timeout: the close ends it
                    await pending
        finally:
            fault_proxy.close()


class TestControlledRedis:
    async def test_kill_and_restart_keeps_acknowledged_writes(
        self, server: ControlledRedis
    ) -> None:
        async with client(server.port) as before:
            assert await before.set("k", "v")
        server.kill()
        server.start()
        async with client(server.port) as after:
            assert "v" == await after.get("k")

    async def test_shutdown_and_start_keeps_the_data(self, server: ControlledRedis) -> None:
        async with client(server.port) as before:
            assert await before.set("k", "v")
        server.shutdown()
        assert not server.running
        server.start()
        async with client(server.port) as after:
            assert "v" == await after.get("k")

    async def test_pause_times_commands_out_and_resume_lets_a_held_one_through(
        self, server: ControlledRedis
    ) -> None:
        async with client(server.port, timeout=SHORT) as impatient, client(server.port) as patient:
            assert await patient.ping()
            server.pause()
            with pytest.raises(RedisTimeoutError):
                await impatient.ping()
            pending = asyncio.ensure_future(patient.set("k", "v"))
            assert await not_done_after(pending, SHORT)
            server.resume()
            assert await pending
            assert "v" == await impatient.get("k")

    async def test_oom_fails_writes_until_turned_off(
        self, server: ControlledRedis, direct: aioredis.Redis
    ) -> None:
        server.oom(True)
        with pytest.raises(OutOfMemoryError):
            await direct.set("k", "v")
        server.oom(False)
        assert await direct.set("k", "v")

    async def test_config_set_turns_appendonly_off_visibly(
        self, server: ControlledRedis, direct: aioredis.Redis
    ) -> None:
        server.config_set("appendonly", "no")
        assert {"appendonly": "no"} == await direct.config_get("appendonly")

    async def test_restore_aof_rolls_back_to_the_snapshot(self, server: ControlledRedis) -> None:
        async with client(server.port) as before:
            assert await before.set("early", "1")
            snapshot = server.snapshot_aof()
            assert await before.set("late", "2")
            assert await before.set("early", "changed")
        server.kill()
        server.restore_aof(snapshot)
        server.start()
        async with client(server.port) as after:
            assert ["1", None] == await after.mget("early", "late")

    def test_a_snapshot_taken_during_writes_loads_without_a_torn_tail(
        self, server: ControlledRedis
    ) -> None:
        stop = threading.Event()

        def write() -> None:
            with redis.Redis(host="127.0.0.1", port=server.port) as writer:
                while not stop.is_set():
                    writer.incr("counter")

        writer = threading.Thread(target=write)
        writer.start()
        try:
            with redis.Redis(host="127.0.0.1", port=server.port) as probe:
                while not probe.exists("counter"):
                    time.sleep(0.01)
            snapshot = server.snapshot_aof()
        finally:
            stop.set()
            writer.join()
        with redis.Redis(host="127.0.0.1", port=server.port) as probe:
            final = int(probe.get("counter") or 0)
        server.kill()
        server.restore_aof(snapshot)
        logged = len(server.log())
        server.start()
        assert "short read" not in server.log()[logged:]  # no command was cut in half
        with redis.Redis(host="127.0.0.1", port=server.port) as after:
            assert 0 < int(after.get("counter") or 0) <= final
