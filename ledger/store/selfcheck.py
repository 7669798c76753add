"""The startup self-check of the ledger store; it never raises.

Its `reason` is shown to agents in `mail_query capabilities`, so every text here is fixed
wording: no URL, host, credential or server error text.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Final

import redis.asyncio as aioredis
import redis.exceptions as rex
from msgspec import Struct

from ledger.store.keys import SCHEMA_VERSION
from ledger.store.ledger_store import LedgerStore
from ledger.store.scripts import SCRIPT_NAMES, script_sha, script_source
from schemas.ledger import SelfCheckReport

MIN_VERSION: Final = (6, 2)
_SETTING: Final = re.compile(r"[a-z-]{1,32}", re.ASCII)
_DEFAULT_TIMEOUT_S: Final = 5.0


class SelfCheckOptions(Struct, frozen=True, kw_only=True):
    """The operator assertions and WAITAOF settings the check honours."""

    provider_managed: bool = False  # SEND_LEDGER_FSYNC=provider_managed
    assume_noeviction: bool = False  # SEND_LEDGER_ASSUME_NOEVICTION=1
    waitaof_replicas: int = 0
    fsync_timeout_ms: int = 2000
    timeout_s: float = _DEFAULT_TIMEOUT_S


class _Refused(Exception):
    """A requirement failed; the message is the public reason."""


async def self_check(
    client: aioredis.Redis,
    options: SelfCheckOptions | None = None,
    *,
    store: LedgerStore | None = None,
) -> SelfCheckReport:
    """Check version, durability, eviction policy, WAITAOF, scripts and meta; never raise."""
    opts = options or SelfCheckOptions()
    version = ""
    try:
        async with asyncio.timeout(opts.timeout_s):
            version = await _version(client)
            mode, waitaof = await _durability(client, opts)
            await _eviction(client, opts)
            await _scripts(client)
            if store is not None:
                meta = await store.ensure_meta()
                if meta.schema != SCHEMA_VERSION:
                    raise _Refused("the ledger namespace holds a ledger of another schema version")
    except _Refused as refused:
        return _refused(str(refused), version)
    except TimeoutError:
        return _refused("the ledger store did not answer the self-check in time", version)
    except rex.AuthenticationError:  # before ConnectionError, its base class
        return _refused("the ledger store refused the credentials", version)
    except (rex.ConnectionError, OSError):
        return _refused("the ledger store is unreachable", version)
    except Exception:  # the self-check must never take the server down
        return _refused("the ledger store self-check failed", version)
    return SelfCheckReport(
        usable=True, reason="", durability_mode=mode, version=version, waitaof=waitaof
    )


def _refused(reason: str, version: str) -> SelfCheckReport:
    return SelfCheckReport(
        usable=False, reason=reason, durability_mode="none", version=version, waitaof=False
    )


async def _version(client: aioredis.Redis) -> str:
    info: dict[str, Any] = await client.info("server")
    version = str(info.get("redis_version", ""))
    parts = version.split(".")
    try:
        found = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        raise _Refused("the ledger store did not report a Redis version") from None
    if found < MIN_VERSION:
        raise _Refused(f"the ledger store needs Redis 6.2 or newer (found {found[0]}.{found[1]})")
    valkey = info.get("valkey_version")
    return f"valkey {valkey}" if valkey else version


async def _config(client: aioredis.Redis, name: str) -> str | None:
    """Return a CONFIG GET value, or None when the server forbids CONFIG."""
    try:
        reply: dict[Any, Any] = await client.config_get(name)
    except rex.ResponseError:
        return None
    for key, value in reply.items():
        if _text(key) == name:
            return _text(value)
    return None


async def _durability(client: aioredis.Redis, opts: SelfCheckOptions) -> tuple[Any, bool]:
    if opts.provider_managed:
        return "provider_managed", False
    persistence: dict[str, Any] = await client.info("persistence")
    if str(persistence.get("aof_enabled", "0")) != "1":
        raise _Refused("AOF persistence is off: the ledger needs appendonly yes")
    fsync = await _config(client, "appendfsync")
    if fsync is None:
        raise _Refused(
            "CONFIG GET is not permitted: set SEND_LEDGER_FSYNC=provider_managed only if the "
            "provider makes every acknowledged write durable"
        )
    waitaof = await _waitaof(client, opts)
    if opts.waitaof_replicas > 0 and not waitaof:
        raise _Refused("SEND_LEDGER_WAITAOF_REPLICAS needs WAITAOF (Redis 7.2 or newer)")
    if fsync == "always":
        return "aof_always", waitaof
    if waitaof:
        return "waitaof", True
    raise _Refused(
        f"appendfsync is {_word(fsync)}: the ledger needs appendfsync always"
        " on a server without WAITAOF"
    )


async def _waitaof(client: aioredis.Redis, opts: SelfCheckOptions) -> bool:
    """Probe WAITAOF; False when the server lacks it, _Refused when it cannot confirm."""
    try:
        reply = await client.execute_command(  # type: ignore[no-untyped-call]
            "WAITAOF", 1, opts.waitaof_replicas, opts.fsync_timeout_ms
        )
    except rex.ResponseError as exc:
        if "unknown command" in str(exc).lower():
            return False
        raise _Refused("WAITAOF is present but refused the durability probe") from None
    local, replicas = int(reply[0]), int(reply[1])
    if local < 1 or replicas < opts.waitaof_replicas:
        raise _Refused("WAITAOF did not confirm the fsync of the durability probe in time")
    return True


async def _eviction(client: aioredis.Redis, opts: SelfCheckOptions) -> None:
    if opts.assume_noeviction:
        return
    policy = await _config(client, "maxmemory-policy")
    if policy is None:
        raise _Refused(
            "CONFIG GET is not permitted: set SEND_LEDGER_ASSUME_NOEVICTION=1 only if the "
            "store never evicts keys"
        )
    if policy != "noeviction":
        raise _Refused(f"maxmemory-policy is {_word(policy)}: the ledger needs noeviction")


async def _scripts(client: aioredis.Redis) -> None:
    for name in SCRIPT_NAMES:
        try:
            sha = await client.script_load(script_source(name))
        except rex.ResponseError:
            raise _Refused("the ledger scripts could not be loaded") from None
        if _text(sha) != script_sha(name):
            raise _Refused("the ledger store answered a wrong script digest")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _word(value: str) -> str:
    """Echo a server setting only when it is a plain setting word."""
    return value if _SETTING.fullmatch(value) else "unsupported"
