"""What a Redis server says about itself that the ledger depends on, read in one round trip.

The durability rule lives here, once: `appendonly yes` with `appendfsync always` (or a verified
WAITAOF, or the operator's provider_managed assertion) and `maxmemory-policy noeviction` (or the
operator's assertion). The startup self-check and the continuous checks (every new connection,
every lease refresh) both apply it to the facts read here. Its reasons are shown to agents in
`mail_query capabilities`, so every text is fixed wording: no URL, host, credential or server
error text.
"""

from __future__ import annotations

import re
from typing import Any, Final

from msgspec import Struct
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AskError, MovedError, ResponseError

from ledger.store.keys import LedgerKeys
from ledger.store.wire import exchange

_SETTING: Final = re.compile(r"[a-z-]{1,32}", re.ASCII)
_WORD_ID: Final = re.compile(r"[0-9a-f]{32}", re.ASCII)


class DurabilityOptions(Struct, frozen=True, kw_only=True):
    """The operator assertions the durability rule honours."""

    provider_managed: bool = False  # SEND_LEDGER_FSYNC=provider_managed
    assume_noeviction: bool = False  # SEND_LEDGER_ASSUME_NOEVICTION=1


class StoreFacts(Struct, frozen=True, kw_only=True):
    """One reading of the server: identity, persistence settings and the ledger's clock."""

    run_id: str
    version: str
    aof_enabled: bool
    appendfsync: str | None  # None: CONFIG GET is not permitted
    maxmemory_policy: str | None  # None: CONFIG GET is not permitted
    clock: int  # meta.clock: advanced by every lifecycle event
    halt: str  # meta.halt: a recorded rollback ("" when none)
    store_id: str  # meta.store_id ("" before the ledger's first start)
    holds_ledger: bool = True  # False: a cluster node that does not serve the ledger's slot


class Verdict(Struct, frozen=True):
    """The durability rule's answer: ok, or the public reason it fails."""

    reason: str = ""
    mode: str = "none"  # aof_always | waitaof | provider_managed when ok

    @property
    def ok(self) -> bool:
        """Tell whether the store keeps every acknowledged write."""
        return not self.reason


def fact_commands(keys: LedgerKeys) -> list[tuple[str, ...]]:
    """The commands one reading sends (read-only; INFO takes one section on Redis 6.2)."""
    return [
        ("INFO", "server"),
        ("INFO", "persistence"),
        ("CONFIG", "GET", "appendfsync"),
        ("CONFIG", "GET", "maxmemory-policy"),
        ("HMGET", keys.meta, "clock", "halt", "store_id"),
    ]


async def read_facts(connection: AbstractConnection, keys: LedgerKeys) -> StoreFacts:
    """Read the facts on one connection (also while it is being set up) in one round trip."""
    replies = await exchange(connection, fact_commands(keys), check_health=False)
    return facts_from(replies)


def facts_from(replies: list[Any]) -> StoreFacts:
    """Build the facts from the replies to `fact_commands` (an error reply fails loudly)."""
    server, persistence, fsync, policy, meta = replies
    holds_ledger = not isinstance(meta, MovedError | AskError)  # another node's slot
    if not holds_ledger:
        meta = [None, None, None]
    for reply in (server, persistence, meta):
        if isinstance(reply, ResponseError):
            raise reply
    info = info_fields(server) | info_fields(persistence)
    clock, halt, store_id = (_text(value) if value is not None else "" for value in meta)
    return StoreFacts(
        run_id=info.get("run_id", ""),
        version=info.get("redis_version", ""),
        aof_enabled=info.get("aof_enabled") == "1",
        appendfsync=_config(fsync),
        maxmemory_policy=_config(policy),
        clock=int(clock) if clock.isdigit() else 0,
        halt=halt,
        store_id=store_id if _WORD_ID.fullmatch(store_id) else "",
        holds_ledger=holds_ledger,
    )


def durability(facts: StoreFacts, options: DurabilityOptions, *, waitaof: bool) -> Verdict:
    """Apply the durability rule to one reading; `waitaof`: the server has a working WAITAOF."""
    if options.provider_managed:
        mode = "provider_managed"
    elif not facts.aof_enabled:
        return Verdict("AOF persistence is off: the ledger needs appendonly yes")
    elif facts.appendfsync is None:
        return Verdict(
            "CONFIG GET is not permitted: set SEND_LEDGER_FSYNC=provider_managed only if the "
            "provider makes every acknowledged write durable"
        )
    elif facts.appendfsync == "always":
        mode = "aof_always"
    elif waitaof:
        mode = "waitaof"
    else:
        return Verdict(
            f"appendfsync is {word(facts.appendfsync)}: the ledger needs appendfsync always"
            " on a server without WAITAOF"
        )
    if not options.assume_noeviction:
        if facts.maxmemory_policy is None:
            return Verdict(
                "CONFIG GET is not permitted: set SEND_LEDGER_ASSUME_NOEVICTION=1 only if the "
                "store never evicts keys"
            )
        if facts.maxmemory_policy != "noeviction":
            return Verdict(
                f"maxmemory-policy is {word(facts.maxmemory_policy)}: the ledger needs noeviction"
            )
    return Verdict(mode=mode)


def word(value: str) -> str:
    """Echo a server setting only when it is a plain setting word."""
    return value if _SETTING.fullmatch(value) else "unsupported"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def info_fields(reply: Any) -> dict[str, str]:
    """The `name:value` lines of an INFO reply."""
    found: dict[str, str] = {}
    for line in _text(reply).splitlines():
        name, sep, value = line.partition(":")
        if sep and not name.startswith("#"):
            found[name] = value.strip()
    return found


def _config(reply: Any) -> str | None:
    """A CONFIG GET reply's value, or None when the server forbids CONFIG."""
    if isinstance(reply, dict):  # RESP3
        values = list(reply.values())
        return _text(values[0]) if values else None
    if isinstance(reply, ResponseError) or not isinstance(reply, list | tuple) or len(reply) < 2:
        return None
    return _text(reply[1])
