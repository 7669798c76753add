"""Concurrent confirms from separate MCP clients against two real server processes sharing one
Redis (sending.md §5 F13, §9.3 check 18): one claim, one SMTP transaction, never a duplicate."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from faults.harness import Server, server_env, start_servers
from mcp import Client

from ledger.connection import connect
from ledger.outcomes import LedgerSettings
from ledger.store import LedgerStore
from support.services import Services
from support.smtp_sink import transactions

pytestmark = pytest.mark.services
NAMESPACE = f"cc-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def servers(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    env = server_env(services, NAMESPACE)
    started = start_servers([env, env], tmp_path_factory.mktemp("concurrency"))
    yield started
    for server in started:
        server.stop()


def message(rcpt: str) -> dict[str, Any]:
    return {"action": "new", "message": {"to": [rcpt], "subject": "Load", "text": "Hello"}}


def arguments(preview: dict[str, Any]) -> dict[str, Any]:
    return {
        "prepared_id": preview["prepared_id"],
        "confirmed_digest": preview["digest"],
        "append_sent": False,
    }


async def one_client_confirm(url: str, preview: dict[str, Any]) -> dict[str, Any]:
    async with Client(url) as client:
        result = await client.call_tool("mail_send_confirmed", arguments(preview))
    return dict(result.structured_content)


class TestOneIdManyClients:
    async def test_hundred_clients_confirming_one_id_make_exactly_one_transaction(
        self, services: Services, servers: list[Server]
    ) -> None:
        rcpt = f"one-{uuid.uuid4().hex[:8]}@example.test"
        async with Client(servers[0].url) as client:
            preview = dict(
                (await client.call_tool("mail_prepare", message(rcpt))).structured_content
            )
        answers = await asyncio.gather(
            *(one_client_confirm(servers[n % 2].url, preview) for n in range(100))
        )
        fresh = [a for a in answers if "resent" not in a]
        replays = [a for a in answers if a.get("resent") is False]
        assert (1, 99) == (len(fresh), len(replays))
        assert "accepted" == fresh[0]["status"]
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))
        store = LedgerStore(connect(services.redis_url), LedgerSettings(namespace=NAMESPACE))
        _, entries = await store.read(preview["prepared_id"])
        await store.client.aclose()
        assert 1 == [e.t for e in entries].count("claimed")


async def run_clients(
    servers: list[Server], rcpts: list[str], *, all_at_once: bool
) -> list[dict[str, Any]]:
    """20 clients prepare their share, then all confirm together: each client either one
    confirm at a time (20 in flight) or its whole share at once (1,000 in flight)."""
    shares = [rcpts[n::20] for n in range(20)]
    ready = asyncio.Event()
    prepared = 0

    async def client_run(n: int) -> list[dict[str, Any]]:
        nonlocal prepared
        async with Client(servers[n % 2].url) as client:
            previews = [await client.call_tool("mail_prepare", message(r)) for r in shares[n]]
            prepared += 1
            if prepared == 20:
                ready.set()
            await ready.wait()
            calls = [
                client.call_tool("mail_send_confirmed", arguments(p.structured_content))
                for p in previews
            ]
            if all_at_once:
                results = await asyncio.gather(*calls)
            else:
                results = [await call for call in calls]
        return [dict(r.structured_content) for r in results]

    batches = await asyncio.gather(*map(client_run, range(20)))
    return [answer for batch in batches for answer in batch]


class TestManyIdsManyClients:
    async def test_a_thousand_preparations_confirmed_by_twenty_clients_send_exactly_once_each(
        self, services: Services, servers: list[Server]
    ) -> None:
        tag = uuid.uuid4().hex[:8]
        rcpts = [f"k{n}-{tag}@example.test" for n in range(1000)]
        answers = await run_clients(servers, rcpts, all_at_once=False)
        seen = [t for t in transactions(services.smtp_spool) if tag in t.rcpt_tos[0]]
        per_rcpt = Counter(t.rcpt_tos[0] for t in seen)
        assert {"accepted": 1000} == dict(Counter(a.get("status") for a in answers))
        assert 1000 == len(seen)
        assert [] == [r for r, n in per_rcpt.items() if n > 1]
        assert set(rcpts) == set(per_rcpt)

    async def test_with_all_thousand_in_flight_at_once_nothing_is_ever_sent_twice(
        self, services: Services, servers: list[Server]
    ) -> None:
        tag = uuid.uuid4().hex[:8]
        rcpts = [f"m{n}-{tag}@example.test" for n in range(1000)]
        answers = await run_clients(servers, rcpts, all_at_once=True)
        seen = [t for t in transactions(services.smtp_spool) if tag in t.rcpt_tos[0]]
        per_rcpt = Counter(t.rcpt_tos[0] for t in seen)
        accepted = sum(a.get("status") == "accepted" for a in answers)
        outcomes = Counter(a.get("status", a.get("error_code")) for a in answers)
        print(f"1,000 in flight: {dict(outcomes)}")
        assert [] == [r for r, n in per_rcpt.items() if n > 1]
        assert accepted == len(seen)
        assert {"accepted": 1000} == dict(outcomes)
