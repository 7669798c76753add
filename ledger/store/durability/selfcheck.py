"""The startup self-check of the ledger store; it never raises.

Its `reason` is shown to agents in `mail_query capabilities`, so every text here is fixed
wording: no URL, host, credential or server error text. The durability rule itself is
facts.py's, shared with the readings taken while serving (monitor.py).

A store that does not answer in time gets `attempts` tries before the check gives up: a Redis
started beside angelos (or still reading its AOF, on a busy host) would otherwise leave sending
off until the next restart. A refusal or an unreachable store is not retried: it answers fast.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import redis.asyncio as aioredis
import redis.exceptions as rex
from msgspec import Struct

from ledger.store.durability.facts import DurabilityOptions, StoreFacts, durability, read_facts
from ledger.store.keys import SCHEMA_VERSION, LedgerKeys
from ledger.store.ledger_store import LedgerStore
from ledger.store.scripts import SCRIPTS
from schemas.ledger import SelfCheckReport

MIN_VERSION: Final = (6, 2)
_DEFAULT_TIMEOUT_S: Final = 5.0
_DEFAULT_ATTEMPTS: Final = 3
TIMED_OUT: Final = "the ledger store did not answer the self-check in time"


class SelfCheckOptions(Struct, frozen=True, kw_only=True):
    """The operator assertions and WAITAOF settings the check honours."""

    provider_managed: bool = False  # SEND_LEDGER_FSYNC=provider_managed
    assume_noeviction: bool = False  # SEND_LEDGER_ASSUME_NOEVICTION=1
    waitaof_replicas: int = 0
    fsync_timeout_ms: int = 2000
    timeout_s: float = _DEFAULT_TIMEOUT_S  # for each attempt
    attempts: int = _DEFAULT_ATTEMPTS  # tries when the store does not answer in time

    @property
    def durability(self) -> DurabilityOptions:
        """The part of the options the durability rule reads."""
        return DurabilityOptions(
            provider_managed=self.provider_managed, assume_noeviction=self.assume_noeviction
        )


class _Refused(Exception):
    """A requirement failed; the message is the public reason."""


class _NotDurable(_Refused):
    """Only the durability rule failed: the store is otherwise ready, and a server may arm and
    wait for the settings to hold (its monitor re-reads them)."""


async def self_check(
    client: aioredis.Redis,
    options: SelfCheckOptions | None = None,
    *,
    store: LedgerStore | None = None,
) -> SelfCheckReport:
    """Check version, durability, eviction policy, WAITAOF, scripts and meta; never raise."""
    opts = options or SelfCheckOptions()
    report = await _check_once(client, opts, store)
    for _ in range(opts.attempts - 1):
        if report.reason != TIMED_OUT:
            break
        report = await _check_once(client, opts, store)
    return report


async def _check_once(
    client: aioredis.Redis, opts: SelfCheckOptions, store: LedgerStore | None
) -> SelfCheckReport:
    version = ""
    store_id = ""
    not_durable = ""
    try:
        async with asyncio.timeout(opts.timeout_s):
            facts = await _facts(client, store.keys if store is not None else LedgerKeys("angelos"))
            version = _version(facts)
            try:
                mode, waitaof = await _durability(client, facts, opts)
            except _NotDurable as refused:
                not_durable, mode, waitaof = str(refused), "none", False
            await _scripts(client)
            if store is not None:
                meta = await store.ensure_meta()
                if meta.schema != SCHEMA_VERSION:
                    raise _Refused("the ledger namespace holds a ledger of another schema version")
                store_id = meta.store_id
    except _Refused as refused:
        return _refused(str(refused), version)
    except TimeoutError:
        return _refused(TIMED_OUT, version)
    except rex.AuthenticationError:  # before ConnectionError, its base class
        return _refused("the ledger store refused the credentials", version)
    except (rex.ConnectionError, OSError):
        return _refused("the ledger store is unreachable", version)
    except Exception:  # the self-check must never take the server down
        return _refused("the ledger store self-check failed", version)
    return SelfCheckReport(
        usable=not not_durable,
        reason=not_durable,
        durability_mode=mode,
        version=version,
        waitaof=waitaof,
        store_id=store_id,
        durability_only=bool(not_durable),
    )


def _refused(reason: str, version: str) -> SelfCheckReport:
    return SelfCheckReport(
        usable=False, reason=reason, durability_mode="none", version=version, waitaof=False
    )


async def _facts(client: aioredis.Redis, keys: LedgerKeys) -> StoreFacts:
    pool = client.connection_pool
    connection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        return await read_facts(connection, keys)
    finally:
        await pool.release(connection)


def _version(facts: StoreFacts) -> str:
    parts = facts.version.split(".")
    try:
        found = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        raise _Refused("the ledger store did not report a Redis version") from None
    if found < MIN_VERSION:
        raise _Refused(f"the ledger store needs Redis 6.2 or newer (found {found[0]}.{found[1]})")
    return facts.version


async def _durability(
    client: aioredis.Redis, facts: StoreFacts, opts: SelfCheckOptions
) -> tuple[Any, bool]:
    # WAITAOF is probed only where the rule would consult it (AOF on, its fsync policy known).
    probe = not opts.provider_managed and facts.aof_enabled and facts.appendfsync is not None
    waitaof = probe and await _waitaof(client, opts)
    if opts.waitaof_replicas > 0 and probe and not waitaof:
        raise _Refused("SEND_LEDGER_WAITAOF_REPLICAS needs WAITAOF (Redis 7.2 or newer)")
    verdict = durability(facts, opts.durability, waitaof=waitaof)
    if not verdict.ok:
        raise _NotDurable(verdict.reason)
    return verdict.mode, waitaof


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


async def _scripts(client: aioredis.Redis) -> None:
    for name in SCRIPTS.names:
        try:
            sha = await client.script_load(SCRIPTS.source(name))
        except rex.ResponseError:
            raise _Refused("the ledger scripts could not be loaded") from None
        if _text(sha) != SCRIPTS.sha(name):
            raise _Refused("the ledger store answered a wrong script digest")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
