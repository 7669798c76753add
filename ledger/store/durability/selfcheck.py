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

import redis.exceptions as rex
from msgspec import Struct

from ledger.store.connection import StoreClient
from ledger.store.durability.facts import (
    DurabilityOptions,
    StoreFacts,
    durability,
    info_fields,
    read_facts,
)
from ledger.store.keys import SCHEMA_VERSION, LedgerKeys
from ledger.store.ledger_store import LedgerStore
from ledger.store.nodes import borrowed, cluster_nodes, on_node
from ledger.store.scripts import SCRIPTS
from ledger.store.wire import exchange
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
    wait_replicas: int = 0  # SEND_LEDGER_WAIT_REPLICAS
    fsync_timeout_ms: int = 2000
    timeout_s: float = _DEFAULT_TIMEOUT_S  # for each attempt
    attempts: int = _DEFAULT_ATTEMPTS  # tries when the store does not answer in time

    @property
    def replicas(self) -> int:
        """The replicas each ledger write must reach (either setting asks for them)."""
        return max(self.wait_replicas, self.waitaof_replicas)

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
    client: StoreClient,
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
    client: StoreClient, opts: SelfCheckOptions, store: LedgerStore | None
) -> SelfCheckReport:
    version = ""
    store_id = ""
    not_durable = ""
    try:
        async with asyncio.timeout(opts.timeout_s):
            keys = store.keys if store is not None else LedgerKeys("angelos")
            facts = await _facts(client, keys)
            version = _version(facts)
            await _cluster(client, keys, opts)
            try:
                mode, waitaof = await _durability(client, keys, facts, opts)
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


async def _facts(client: StoreClient, keys: LedgerKeys) -> StoreFacts:
    async with borrowed(client, keys.meta) as connection:
        return await read_facts(connection, keys)


async def _cluster(client: StoreClient, keys: LedgerKeys, opts: SelfCheckOptions) -> None:
    """On a cluster: every node keeps every acknowledged write, and the replicas of the
    ledger's shard, which a failover may promote, are waited for."""
    nodes = await cluster_nodes(client)
    if not nodes:
        return
    failing = 0
    first = ""
    for node in nodes:
        async with on_node(node) as connection:
            verdict = durability(await read_facts(connection, keys), opts.durability, waitaof=False)
        if not verdict.ok:
            failing += 1
            first = first or verdict.reason
    if failing:
        raise _Refused(
            f"{failing} of {len(nodes)} Redis Cluster nodes fail the durability rule ({first}); "
            "fix every node, then restart"
        )
    # The replicas WAIT can count are those connected to the ledger's primary right now.
    async with borrowed(client, keys.meta) as connection:
        (reply,) = await exchange(connection, [("INFO", "replication")])
    replicas = int(info_fields(reply).get("connected_slaves") or 0)
    wanted = opts.replicas
    if replicas and not wanted:
        raise _Refused(
            f"the ledger's cluster shard has {replicas} replica(s) that a failover may promote: "
            "set SEND_LEDGER_WAIT_REPLICAS to at least 1"
        )
    if wanted > replicas:
        raise _Refused(
            f"SEND_LEDGER_WAIT_REPLICAS asks {wanted} replica(s); the ledger's cluster shard "
            f"has {replicas}"
        )


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
    client: StoreClient, keys: LedgerKeys, facts: StoreFacts, opts: SelfCheckOptions
) -> tuple[Any, bool]:
    # WAITAOF is probed only where the rule would consult it (AOF on, its fsync policy known).
    probe = not opts.provider_managed and facts.aof_enabled and facts.appendfsync is not None
    waitaof = probe and await _waitaof(client, keys, opts)
    if opts.waitaof_replicas > 0 and probe and not waitaof:
        raise _Refused("SEND_LEDGER_WAITAOF_REPLICAS needs WAITAOF (Redis 7.2 or newer)")
    verdict = durability(facts, opts.durability, waitaof=waitaof)
    if not verdict.ok:
        raise _NotDurable(verdict.reason)
    return verdict.mode, waitaof


async def _waitaof(client: StoreClient, keys: LedgerKeys, opts: SelfCheckOptions) -> bool:
    """Probe WAITAOF on the ledger's node; False when the server lacks it, _Refused when it
    cannot confirm."""
    async with borrowed(client, keys.meta) as connection:
        (reply,) = await exchange(
            connection, [("WAITAOF", 1, opts.waitaof_replicas, opts.fsync_timeout_ms)]
        )
    if isinstance(reply, rex.ResponseError):
        if "unknown command" in str(reply).lower():
            return False
        raise _Refused("WAITAOF is present but refused the durability probe")
    local, replicas = int(reply[0]), int(reply[1])
    if local < 1 or replicas < opts.waitaof_replicas:
        raise _Refused("WAITAOF did not confirm the fsync of the durability probe in time")
    return True


async def _scripts(client: StoreClient) -> None:
    """Load every script (on a cluster, redis-py sends SCRIPT LOAD to every primary)."""
    for name in SCRIPTS.names:
        try:
            sha = await client.script_load(SCRIPTS.source(name))
        except rex.ResponseError:
            raise _Refused("the ledger scripts could not be loaded") from None
        shas = list(sha.values()) if isinstance(sha, dict) else [sha]
        if any(_text(each) != SCRIPTS.sha(name) for each in shas):
            raise _Refused("the ledger store answered a wrong script digest")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
