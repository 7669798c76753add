"""What the store-fault tests share: two `angelos serve` processes on one private Redis (behind a
steerable proxy when the fault is on the network), a storm of concurrent confirms, and the
checks every fault must pass against the SMTP sink's spool.

A storm prepares one message per send (each to its own recipient, so the spool tells which
sends arrived), then confirms them all at once, alternating between the two processes; every
tenth is confirmed through both processes at the same moment. The verdict on a run:
- no duplicate: no recipient has more than one stored message;
- no status contradicts the spool: `accepted` only for a stored message, `rejected`, `prepared`
  and `expired` only for one that is not stored (`unknown` may be either), in every answer of
  the storm and in every `send_status` afterwards;
- every claim closes: no stream stays CLAIMED, ATTEMPTING or COMMITTED, and the time that took
  after the store was back is measured;
- verify is clean, or reports only what is true.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from faults.harness import Server, call, ledger_cli, server_env, start_servers
from msgspec import Struct, field

from ledger.lifecycle import state_after_types
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from support.fault_proxy import FaultProxy
from support.redis_control import ControlledRedis
from support.services import Services
from support.smtp_sink import transactions

SENDS = 60
DOUBLED_EVERY = 10  # every tenth send is confirmed through both processes at once
# Half the default lease: a store fault of a few seconds does not cost the lease, so sends ride
# it out instead of all stopping before the network. The grace must exceed the dispatch
# deadline + the lease + 60 s (6 + 15 + 60).
TIMING = {
    "SEND_DISPATCHER_LEASE_MS": "15000",
    "SEND_DISPATCHER_LEASE_REFRESH_MS": "1000",
    "SEND_RECOVERY_GRACE_S": "82",
}
GRACE_S = 82
CLOSE_BOUND_S = GRACE_S + 10  # the recovery grace plus a small bound
OPEN_STATES = frozenset({"CLAIMED", "ATTEMPTING", "COMMITTED", "FILING"})
SINK_HOLD = "slow-0.3"  # the sink stores each message, then holds its 250 this long


class Send(Struct):
    """One prepared message of a storm and everything learned about it."""

    n: int
    rcpt: str
    pid: str = ""
    digest: str = ""
    answers: list[str] = field(default_factory=list)  # each confirm's status or error code


class Row(Struct, kw_only=True):
    """One line of the fault table."""

    fault: str
    attempted: int = 0  # confirms issued
    accepted: int = 0  # final statuses
    rejected: int = 0
    unknown: int = 0
    other: int = 0
    delivered: int = 0  # sends with a stored message at the sink
    duplicates: int = 0
    lies: int = 0
    close_s: float = 0.0  # from the store's return until no claim was open
    deferred: int = 0  # closing events the servers could not write at once (their closer did)
    answers: dict[str, int] = field(default_factory=dict)  # the storm's answers, by kind


class Rig:
    """A private Redis (and optional proxy), two servers on it, one namespace and data dir."""

    def __init__(self, services: Services, tmp: Path, fault: str, *, proxied: bool) -> None:
        self.services = services
        self.fault = fault
        self.tag = uuid.uuid4().hex[:10]
        self.namespace = f"sf-{self.tag}"
        (tmp / "redis").mkdir()
        self.redis = ControlledRedis(tmp / "redis")
        self.proxy: FaultProxy | None = None
        self.proxied = proxied
        self.tmp = tmp
        self.servers: list[Server] = []
        self.sends: list[Send] = []
        self.row = Row(fault=fault)

    def env(self, **extra: str) -> dict[str, str]:
        """The servers' environment (the CLI's too, when `direct`)."""
        url = self.redis.url
        if self.proxy is not None:
            url = f"redis://127.0.0.1:{self.proxy.port}/0"
        return server_env(
            self.services,
            self.namespace,
            ANGELOS_REDIS_URL=url,
            ANGELOS_DATA_DIR=str(self.tmp / "data"),  # one host: both servers share the witness
            **{**TIMING, **extra},
        )

    def cli_env(self) -> dict[str, str]:
        """The CLI's environment: the store directly, the same data directory."""
        return {**self.env(), "ANGELOS_REDIS_URL": self.redis.url}

    @contextlib.contextmanager
    def running(self, **extra: str) -> Iterator[Rig]:
        """Start Redis, the proxy and both servers; stop everything afterwards."""
        self.redis.start()
        try:
            if self.proxied:
                self.proxy = FaultProxy("127.0.0.1", self.redis.port)
                self.proxy.start()
            env = self.env(**extra)
            self.servers = start_servers([env, env], self.tmp)
            try:
                yield self
            finally:
                for server in self.servers:
                    server.stop()
        finally:
            if self.proxy is not None:
                self.proxy.close()
            self.redis.stop()

    # ------------------------------------------------------------------ the storm

    async def prepare_all(self, count: int = SENDS) -> list[Send]:
        """Prepare `count` messages, each to its own recipient."""
        sends = [
            Send(n, f"{SINK_HOLD}@s{n}-{self.tag}.example.test")
            for n in range(len(self.sends), len(self.sends) + count)
        ]

        async def one(send: Send) -> None:
            body = await call(self.servers[send.n % 2].url, "mail_prepare", {
                "action": "new",
                "message": {"to": [send.rcpt], "subject": "Storm", "text": f"Send {send.n}"},
            })  # fmt: skip
            assert body.get("status") == "prepared", body
            send.pid, send.digest = body["prepared_id"], body["digest"]

        await asyncio.gather(*(one(send) for send in sends))
        self.sends += sends
        return sends

    async def confirm(self, send: Send, server: Server) -> None:
        """Confirm once through one server; note its answer (or its failure)."""
        self.row.attempted += 1
        arguments = {
            "prepared_id": send.pid,
            "confirmed_digest": send.digest,
            "append_sent": False,
        }
        try:
            body = await call(server.url, "mail_send_confirmed", arguments, within=150)
        except Exception as exc:  # a timeout or a dropped HTTP call: the answer is unknown
            send.answers.append(f"call-failed:{type(exc).__name__}")
            return
        send.answers.append(str(body.get("status") or body.get("error_code")))

    def storm(self, sends: list[Send]) -> Awaitable[Any]:
        """Confirm every send at once (every tenth through both servers) as one awaitable."""
        calls = []
        for send in sends:
            calls.append(self.confirm(send, self.servers[send.n % 2]))
            if send.n % DOUBLED_EVERY == 0:
                calls.append(self.confirm(send, self.servers[(send.n + 1) % 2]))
        return asyncio.gather(*calls)

    async def stored(self, at_least: int, within_s: float = 20) -> None:
        """Wait until the sink stored `at_least` messages of this run (mid-storm)."""
        deadline = time.monotonic() + within_s
        while len(self.delivered()) < at_least and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------------ the verdict

    def delivered(self) -> Counter[str]:
        """How many stored messages each of this run's recipients has."""
        return Counter(
            t.rcpt_tos[0].lower()
            for t in transactions(self.services.smtp_spool)
            if t.stored and t.rcpt_tos and self.tag in t.rcpt_tos[0]
        )

    async def wait_closed(self, since: float) -> None:
        """Wait until no claim is open (bounded); record how long after `since` that took."""
        client = connect(self.redis.url)
        store = LedgerStore(client, LedgerSettings(namespace=self.namespace))
        try:
            while True:
                states = [await self.state(store, send.pid) for send in self.sends]
                if not OPEN_STATES & set(states):
                    break
                assert time.monotonic() - since < CLOSE_BOUND_S, Counter(states)
                await asyncio.sleep(0.2)
        finally:
            await client.aclose()
        self.row.close_s = round(max(0.0, time.monotonic() - since), 1)

    @staticmethod
    async def state(store: LedgerStore, pid: str) -> str:
        """The lifecycle state of one stream, read directly from Redis."""
        for _ in range(50):
            with contextlib.suppress(Exception):
                _, entries = await store.read(pid)
                return state_after_types([e.t for e in entries])
            await asyncio.sleep(0.2)
        raise AssertionError("the store did not answer the test's own reads")

    async def statuses(self) -> dict[str, dict[str, Any]]:
        """send_status of every send, through alternating servers (retried while unavailable)."""
        found: dict[str, dict[str, Any]] = {}
        for send in self.sends:
            for attempt in range(20):
                body = await call(
                    self.servers[(send.n + attempt) % 2].url,
                    "mail_query",
                    {"action": "send_status", "prepared_id": send.pid},
                )
                if "status" in body:
                    found[send.pid] = dict(body)
                    break
                await asyncio.sleep(0.5)
            else:
                raise AssertionError(f"send_status never answered for {send.pid}: {body}")
        return found

    async def verdict(self, *, table: bool = True) -> dict[str, dict[str, Any]]:
        """Check the run against the spool; fill (and print) the fault table's row when
        `table`; return the statuses."""
        delivered = self.delivered()
        statuses = await self.statuses()
        finals = Counter(statuses[s.pid]["status"] for s in self.sends)
        lies: list[tuple[int, str, str]] = []
        for send in self.sends:
            stored = delivered[send.rcpt.lower()] > 0
            for said in [*send.answers, statuses[send.pid]["status"]]:
                if contradicts(said, stored):
                    lies.append((send.n, said, "stored" if stored else "not stored"))
        row = self.row
        row.accepted, row.rejected = finals["accepted"], finals["rejected"]
        row.unknown = finals["unknown"]
        row.other = sum(finals.values()) - row.accepted - row.rejected - row.unknown
        row.delivered = sum(1 for send in self.sends if delivered[send.rcpt.lower()])
        row.duplicates = sum(1 for n in delivered.values() if n > 1)
        row.lies = len(lies)
        if table:
            row.answers = dict(Counter(a for send in self.sends for a in send.answers))
            row.deferred = sum(s.log().count('"send_close_deferred"') for s in self.servers)
            print(f"store fault table: {json.dumps(row_dict(row))}")
        assert 0 == row.duplicates, delivered
        assert [] == lies
        assert 0 == finals["sending"], finals
        return statuses

    def verify(self) -> dict[str, Any]:
        """`angelos ledger verify --json` on the store directly."""
        done = ledger_cli(self.cli_env(), "verify", "--json")
        assert done.stdout, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        return report


def contradicts(said: str, stored: bool) -> bool:
    """Tell whether a status (or answer) contradicts what the sink holds."""
    if said == "accepted":
        return not stored
    if said in ("rejected", "prepared", "expired"):
        return stored
    return False  # unknown, sending (an answer), replays, errors: they claim nothing


def row_dict(row: Row) -> dict[str, Any]:
    """The fault table's row as a plain mapping (for the printed table)."""
    return {name: getattr(row, name) for name in row.__struct_fields__}


async def with_fault(
    rig: Rig,
    inject: Callable[[], None],
    restore: Callable[[], None],
    hold_s: float,
    *,
    after_stored: int = 8,
) -> None:
    """Storm all sends, inject the fault mid-storm, hold it, restore it, and judge the run."""
    await rig.prepare_all()
    storm = asyncio.ensure_future(rig.storm(rig.sends))
    await rig.stored(after_stored)
    await asyncio.to_thread(inject)
    await asyncio.sleep(hold_s)
    await asyncio.to_thread(restore)
    back = time.monotonic()
    await storm
    await rig.wait_closed(back)
    await rig.verdict()
    # Everything confirmed again: what the fault left unsent may go now, once; nothing twice.
    await rig.storm(rig.sends)
    await rig.wait_closed(time.monotonic())
    await rig.verdict(table=False)
    report = rig.verify()
    assert report["ok"], report["findings"]

