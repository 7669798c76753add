"""Running `angelos ledger …` as an operator would, against the session's Redis, for tests."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from support.angelos_process import ROOT, angelos_command, clean_env
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
