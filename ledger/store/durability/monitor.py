"""What this process knows about its store right now: durable or not, halted or not, which server.

The startup self-check is not enough: an operator may turn AOF off on a running server, a server
may come back from a restart with other settings or an older data set, a failover may promote a
replica that lacks acknowledged writes. So the store is read again on every new connection
(before the connection carries any command: `on_connect`), whenever the server's run_id changes
(which only a new connection can reveal), and with every lease refresh (`check`). A failed
durability rule stops new claims and every network step of a send until it holds again; a clock
behind this host's witness records a rollback halt in the store, which only a person clears.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec
import structlog
from redis.asyncio.connection import AbstractConnection

from ledger.store.answers import Halt
from ledger.store.connection import StoreClient
from ledger.store.durability.facts import (
    DurabilityOptions,
    StoreFacts,
    Verdict,
    durability,
    read_facts,
)
from ledger.store.durability.witness import Witness
from ledger.store.keys import LedgerKeys
from ledger.store.nodes import borrowed
from ledger.store.scripts import SCRIPTS
from ledger.store.wire import exchange

log = structlog.get_logger("angelos.ledger.store")
NOT_CHECKED: Final = Verdict("the ledger store has not been checked yet")


class StoreMonitor:
    """Holds the latest verdict on the store and re-reads it on new connections and refreshes."""

    def __init__(
        self,
        keys: LedgerKeys,
        options: DurabilityOptions | None = None,
        *,
        waitaof: bool = False,
    ) -> None:
        self.keys = keys
        self.options = options or DurabilityOptions()
        self.waitaof = waitaof
        self.witness: Witness | None = None
        self.verdict = NOT_CHECKED
        self.halt: Halt | None = None
        self.run_id = ""
        self.listeners: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ what callers ask

    @property
    def blocked(self) -> str:
        """Say why no new send may start now ("" when sends may start)."""
        if self.halt is not None:
            return self.halt.reason
        return self.verdict.reason

    def network_ok(self) -> bool:
        """Tell whether a send may take its next network step (durable and not halted)."""
        return not self.blocked

    def floor(self) -> int:
        """The highest clock this host has seen (0 without a witness)."""
        return 0 if self.witness is None else self.witness.floor()

    # ------------------------------------------------------------------ readings

    async def on_connect(self, connection: AbstractConnection) -> None:
        """redis-py's connect hook: the usual handshake, then a reading before any command."""
        await connection.on_connect()
        await self._reading(connection)

    async def check(self, client: StoreClient) -> None:
        """Read the store on a pooled connection to the ledger's node (the lease refresh)."""
        async with borrowed(client, self.keys.meta) as connection:
            await self._reading(connection)

    async def _reading(self, connection: AbstractConnection) -> None:
        # The floor is taken before the reading is sent: every clock it holds was answered by
        # the store before it reads the meta, so only a store that went back can be below it.
        floor = self.floor()
        facts = await read_facts(connection, self.keys)
        if not facts.holds_ledger:
            return  # a cluster node without the ledger's slot: the self-check read its settings
        if floor > facts.clock:
            # Behind the witness: the store forgot acknowledged writes. Record the halt in the
            # store itself, for every process, and lift its clock to ours so that the next
            # detection is a new loss, not this one again.
            (reply,) = await exchange(
                connection,
                [("EVAL", SCRIPTS.source("guard"), 1, self.keys.meta, floor)],
                check_health=False,
            )
            if not facts.halt:
                log.critical(
                    "send_ledger_rollback_detected", store_clock=facts.clock, witness_clock=floor
                )
            stored = reply[1] if isinstance(reply, list) else b""
            local = f"{time.time_ns() // 1_000_000} {facts.clock} {floor}"  # the write failed
            halt = stored.decode("ascii", "replace") if isinstance(stored, bytes) else ""
            facts = msgspec.structs.replace(facts, halt=halt or facts.halt or local)
        self.observe(facts)

    def observe(self, facts: StoreFacts) -> None:
        """Adopt a reading: log what changed and tell the listeners."""
        verdict = durability(facts, self.options, waitaof=self.waitaof)
        halt = Halt.parse(facts.halt) if facts.halt else None
        changed = False
        if facts.run_id and facts.run_id != self.run_id:
            if self.run_id:
                log.warning("ledger_store_restarted", run_id=facts.run_id)
            self.run_id = facts.run_id
        if verdict.reason != self.verdict.reason:
            if verdict.ok and self.verdict is NOT_CHECKED:
                log.info("ledger_store_checked", mode=verdict.mode)
            elif verdict.ok:
                log.warning("ledger_store_durable_again", mode=verdict.mode)
            else:
                log.critical("ledger_store_not_durable", reason=verdict.reason)
            changed = True
        if halt != self.halt:
            if halt is None:
                log.warning("send_ledger_halt_cleared")
            else:
                log.critical(
                    "send_ledger_halted",
                    store_clock=halt.store_clock,
                    witness_clock=halt.witness_clock,
                )
            changed = True
        self.verdict, self.halt = verdict, halt
        if self.witness is not None:
            self.witness.saw(facts.clock)
        if changed:
            for listener in list(self.listeners):
                listener()
