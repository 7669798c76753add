"""The OAuth store's Lua scripts, loaded as package data behind a shared prelude."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any, Final

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

SCRIPT_NAMES: Final = (
    "budget",
    "consume",
    "swap",
    "rotate_session",
    "put_consent",
    "bootstrap",
    "grant_create",
    "grant_list",
    "grant_read",
    "refresh_issue",
    "refresh_rotate",
)

Arg = str | bytes | int


def _read(name: str) -> str:
    return (
        resources.files("service.auth.server.store")
        .joinpath("lua", f"{name}.lua")
        .read_text("utf-8")
    )


@cache
def script_source(name: str) -> str:
    """Return the full source of one script: the shared prelude, then the script body."""
    if name not in SCRIPT_NAMES:
        raise ValueError(f"no OAuth store script named {name!r}")
    return _read("common") + "\n" + _read(name)


@cache
def script_sha(name: str) -> str:
    """Return the SHA-1 Redis uses to name a loaded script."""
    return hashlib.sha1(script_source(name).encode("utf-8")).hexdigest()


async def run_script(
    client: aioredis.Redis, name: str, keys: Sequence[str], args: Sequence[Arg]
) -> Any:
    """Run a script by its SHA, loading it first when this Redis has not seen it yet."""
    try:
        return await client.evalsha(script_sha(name), len(keys), *keys, *args)
    except NoScriptError:
        await client.script_load(script_source(name))
        return await client.evalsha(script_sha(name), len(keys), *keys, *args)
