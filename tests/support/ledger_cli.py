"""Running `angelos ledger …` as an operator would, against the session's Redis, for tests."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from ledger.ids import new_id
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerStore
from support.angelos_process import ROOT, angelos_command, clean_env
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, UNKNOWN
from support.ledger_redis import advance, claimed_send, make_store, prepared_send
from support.services import Services

Fields = dict[bytes, bytes]


def run_ledger(
    services: Services, namespace: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run one ledger command with the servers' environment for `namespace` (plus `env`)."""
    settings = {**services.product_env, "SEND_LEDGER_NAMESPACE": namespace, **env}
    return subprocess.run(
        angelos_command("ledger", *args),
        env=clean_env(settings),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    """Decode a command's JSON output (failing with its stderr when there is none)."""
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


async def rewrite_entry(
    client: aioredis.Redis, key: str, seq: int, change: Callable[[Fields], Awaitable[None] | None]
) -> None:
    """Change one stored entry's fields in place (streams are append-only: rebuild the key)."""
    items = await client.xrange(key)
    await client.delete(key)
    for entry_id, fields in items:
        if entry_id == f"0-{seq}".encode():
            done = change(fields)
            if done is not None:
                await done
        await client.xadd(key, fields, id=entry_id)


async def rewrite(client: aioredis.Redis, key: str, seq: int, old: bytes, new: bytes) -> None:
    """Change bytes inside one stored event, its hash left as it was."""

    def edit(fields: Fields) -> None:
        assert old in fields[b"e"]
        fields[b"e"] = fields[b"e"].replace(old, new, 1)

    await rewrite_entry(client, key, seq, edit)


async def some_sends(store: LedgerStore) -> dict[str, str]:
    """One send in each of a few states, all written through the real scripts."""
    accepted, head = await claimed_send(store)
    await advance(store, accepted, head, ATTEMPT, COMMIT, ACCEPTED)
    unknown, head = await claimed_send(store)
    await advance(store, unknown, head, ATTEMPT, COMMIT, UNKNOWN)
    sending, head = await claimed_send(store)
    await advance(store, sending, head, ATTEMPT)
    prepared, _ = await prepared_send(store)
    return {"accepted": accepted, "unknown": unknown, "sending": sending, "prepared": prepared}


# Fixtures: a test module imports them by name (and lists them in __all__).


@pytest.fixture(name="client")
async def session_redis_fixture(services: Services) -> AsyncIterator[aioredis.Redis]:
    """A client of the session's Redis."""
    redis_client = connect(services.redis_url)
    yield redis_client
    await redis_client.aclose()


@pytest.fixture(name="namespace")
async def namespace_fixture(client: aioredis.Redis) -> AsyncIterator[str]:
    """A fresh ledger namespace, its keys deleted afterwards."""
    name = f"cli-{new_id()[:12]}"
    yield name
    keys = [key async for key in client.scan_iter(match=f"{name}:*")]
    if keys:
        await client.delete(*keys)


@pytest.fixture(name="store")
def store_fixture(client: aioredis.Redis, namespace: str) -> LedgerStore:
    """A store on that namespace with the servers' default retention."""
    return make_store(client, namespace, retention_ms=604_800_000)
