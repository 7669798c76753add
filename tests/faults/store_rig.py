"""The rig of the store-fault tests: two `angelos serve` processes on one private Redis (behind
a steerable proxy when the fault is on the network), a storm of concurrent confirms, the fault,
and the checks every fault must pass against the SMTP sink's spool (the scenarios are in
store_faults.py).

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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from faults.harness import Server, ledger_cli, server_env, start_servers
from mcp import Client
from msgspec import Struct, field

from ledger.lifecycle import state_after_types
from ledger.store.bulk import BulkReader
from ledger.store.connection import connect
from ledger.store.keys import LedgerKeys
from support.angelos_process import free_port
from support.fault_proxy import FaultProxy
from support.redis_control import ControlledRedis
from support.services import Services
from support.smtp_sink import transactions

SENDS = 60
STARTS = 3  # tries to start a peer before the last one, whose failure is the test's
DOUBLED_EVERY = 10  # every tenth send is confirmed through both processes at once
# Half the default lease: a store fault of a few seconds does not cost the lease, so sends ride
# it out instead of all stopping before the network. The grace must exceed the dispatch
# deadline + the lease + 60 s (10 + 15 + 60).
TIMING = {
    "SEND_DISPATCHER_LEASE_MS": "15000",
    "SEND_DISPATCHER_LEASE_REFRESH_MS": "1000",
    # The sink's 2 s hold (below) must end well inside the wait for the final reply.
    "SMTP_DATA_TERMINATION_TIMEOUT_S": "5",
    "SEND_DISPATCH_DEADLINE_S": "10",
    "SEND_RECOVERY_GRACE_S": "86",
}
GRACE_S = 86
CLOSE_BOUND_S = GRACE_S + 10  # the recovery grace plus a small bound
OPEN_STATES = frozenset({"CLAIMED", "ATTEMPTING", "COMMITTED", "FILING"})
# The sink stores each message, then holds its 250 this long: with four SMTP connections per
# server at most four sends a second close, so open sends pile up even when a busy machine
# lets the confirms in slowly, and the fault meets sends queued and in flight.
SINK_HOLD = "slow-2"
OPEN_AT_FAULT = 10  # the fault is injected once this many sends are open


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
    attempted: int = 0  # confirms issued in the storm the fault hit
    accepted: int = 0  # final statuses
    rejected: int = 0
    unknown: int = 0
    other: int = 0
    delivered: int = 0  # sends with a stored message at the sink
    duplicates: int = 0
    lies: int = 0
    open_at_fault: int = 0  # sends not yet closed when the fault began
    close_s: float = 0.0  # from the store's return until no claim was open
    deferred: int = 0  # closing events the servers could not write at once (their closer did)
    status_failures: int = 0  # send_status calls (every 250 ms) that failed during the run
    last_failure_s: float | None = None  # latest failed send_status after the store was back
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
        self.clients: list[Client] = []
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

    @contextlib.asynccontextmanager
    async def running(self, **extra: str) -> AsyncIterator[Rig]:
        """Start Redis, the proxy and both servers; stop everything afterwards."""
        await self._start_store()
        try:
            if self.proxied:
                self.proxy = FaultProxy("127.0.0.1", self.redis.port)
                self.proxy.start()
            await self._start_servers(self.env(**extra))
            try:
                # One MCP session per server for the whole run; concurrent calls share it, as
                # an agent's client would (a new session per call costs this process more CPU
                # than the servers spend answering).
                async with Client(self.servers[0].url) as one, Client(self.servers[1].url) as two:
                    self.clients = [one, two]
                    yield self
            finally:
                for server in self.servers:
                    await asyncio.to_thread(server.stop)
        finally:
            if self.proxy is not None:
                self.proxy.close()
            await asyncio.to_thread(self.redis.stop)

    # A free port is free only until someone binds it: with eleven rigs starting at once, two
    # can pick the same one. Whoever loses starts again on another.

    async def _start_store(self) -> None:
        for _ in range(STARTS):
            try:
                await asyncio.to_thread(self.redis.start)
                return
            except RuntimeError:
                await asyncio.to_thread(self.redis.stop)
                self.redis.port = free_port()
        await asyncio.to_thread(self.redis.start)

    async def _start_servers(self, env: dict[str, str]) -> None:
        for _ in range(STARTS):
            try:
                self.servers = await asyncio.to_thread(start_servers, [env, env], self.tmp)
                return
            except RuntimeError as exc:
                if "create_server" not in str(exc):  # the log names no error text, its call
                    raise
        self.servers = await asyncio.to_thread(start_servers, [env, env], self.tmp)

    async def call(self, n: int, tool: str, arguments: dict[str, Any], within: float = 60) -> Any:
        """One tool call through server n's session; its structured content (errors too)."""
        async with asyncio.timeout(within):
            result = await self.clients[n % 2].call_tool(tool, arguments)
        return result.structured_content

    # ------------------------------------------------------------------ the storm

    async def prepare_all(self, count: int = SENDS) -> list[Send]:
        """Prepare `count` messages, each to its own recipient."""
        sends = [
            Send(n, f"{SINK_HOLD}@s{n}-{self.tag}.example.test")
            for n in range(len(self.sends), len(self.sends) + count)
        ]

        async def one(send: Send) -> None:
            body = await self.call(send.n, "mail_prepare", {
                "action": "new",
                "message": {"to": [send.rcpt], "subject": "Storm", "text": f"Send {send.n}"},
            })  # fmt: skip
            assert body.get("status") == "prepared", body
            send.pid, send.digest = body["prepared_id"], body["digest"]

        await asyncio.gather(*(one(send) for send in sends))
        self.sends += sends
        return sends

    async def confirm(self, send: Send, n: int) -> None:
        """Confirm once through server n; note its answer (or its failure)."""
        arguments = {
            "prepared_id": send.pid,
            "confirmed_digest": send.digest,
            "append_sent": False,
        }
        try:
            body = await self.call(n, "mail_send_confirmed", arguments, within=150)
        except Exception as exc:  # a timeout or a dropped HTTP call: the answer is unknown
            send.answers.append(f"call-failed:{type(exc).__name__}")
            return
        send.answers.append(str(body.get("status") or body.get("error_code")))

    def storm(self, sends: list[Send]) -> Awaitable[Any]:
        """Confirm every send at once (every tenth through both servers) as one awaitable."""
        calls = []
        for send in sends:
            calls.append(self.confirm(send, send.n))
            if send.n % DOUBLED_EVERY == 0:
                calls.append(self.confirm(send, send.n + 1))
        return asyncio.gather(*calls)

    async def opened(self, at_least: int, within_s: float = 60) -> int:
        """Wait until `at_least` sends are claimed and not yet closed; return how many are."""
        client = connect(self.redis.url)
        reader = BulkReader(client, LedgerKeys(self.namespace))
        deadline = time.monotonic() + within_s
        try:
            while True:
                states = await self.states(reader)
                open_now = sum(1 for state in states if state in OPEN_STATES)
                if open_now >= at_least or time.monotonic() > deadline:
                    return open_now
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()

    async def stored(self, at_least: int, within_s: float = 20) -> None:
        """Wait until the sink stored `at_least` messages of this run (mid-storm)."""
        deadline = time.monotonic() + within_s
        while self.stored_count() < at_least and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ the verdict

    def delivered(self) -> Counter[str]:
        """How many stored messages each of this run's recipients has."""
        return Counter(
            t.rcpt_tos[0].lower()
            for t in transactions(self.services.smtp_spool)
            if t.stored and t.rcpt_tos and self.tag in t.rcpt_tos[0]
        )

    def stored_count(self) -> int:
        """How many messages of this run the sink stored (a cheap scan of its log)."""
        log = Path(self.services.smtp_spool) / "transactions.jsonl"
        if not log.exists():  # the sink writes it with its first transaction
            return 0
        marker, stored = f"-{self.tag}.example.test".encode(), b'"stored": true'
        return sum(1 for line in log.read_bytes().splitlines() if marker in line and stored in line)

    async def wait_closed(self, since: float) -> float:
        """Wait until no claim is open (bounded); return how long after `since` that took."""
        client = connect(self.redis.url)
        reader = BulkReader(client, LedgerKeys(self.namespace))
        try:
            while True:
                states = await self.states(reader)
                if not OPEN_STATES & set(states):
                    break
                assert time.monotonic() - since < CLOSE_BOUND_S, Counter(states)
                await asyncio.sleep(0.2)
        finally:
            await client.aclose()
        return round(max(0.0, time.monotonic() - since), 1)

    async def states(self, reader: BulkReader) -> list[str]:
        """The lifecycle state of every send, read directly from Redis in one round trip."""
        for _ in range(50):
            with contextlib.suppress(Exception):
                _, streams = await reader.entries([send.pid for send in self.sends])
                return [state_after_types([e.t for e in entries]) for entries in streams]
            await asyncio.sleep(0.2)
        raise AssertionError("the store did not answer the test's own reads")

    async def statuses(self) -> dict[str, dict[str, Any]]:
        """send_status of every send, through alternating servers (retried while unavailable)."""
        found: dict[str, dict[str, Any]] = {}
        for send in self.sends:
            for attempt in range(20):
                body = await self.call(
                    send.n + attempt, "mail_query",
                    {"action": "send_status", "prepared_id": send.pid},
                )  # fmt: skip
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
        duplicates = sum(1 for n in delivered.values() if n > 1)
        if table:  # the row describes the storm the fault hit, not what came after
            row = self.row
            row.accepted, row.rejected = finals["accepted"], finals["rejected"]
            row.unknown = finals["unknown"]
            row.other = sum(finals.values()) - row.accepted - row.rejected - row.unknown
            row.delivered = sum(1 for send in self.sends if delivered[send.rcpt.lower()])
            row.duplicates, row.lies = duplicates, len(lies)
            row.answers = dict(Counter(a for send in self.sends for a in send.answers))
            row.attempted = sum(row.answers.values())
            row.deferred = sum(s.log().count('"send_close_deferred"') for s in self.servers)
        assert 0 == duplicates, delivered
        assert [] == lies
        assert 0 == finals["sending"], finals
        return statuses

    async def verify(self) -> dict[str, Any]:
        """`angelos ledger verify --json` on the store directly."""
        done = await asyncio.to_thread(ledger_cli, self.cli_env(), "verify", "--json")
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


class StatusPoller:
    """send_status through both servers every 250 ms; when each call was made and if it failed."""

    def __init__(self, rig: Rig, pid: str) -> None:
        self.rig, self.pid = rig, pid
        self.calls: list[tuple[float, bool]] = []  # (monotonic start, answered with a status)
        self._stop = asyncio.Event()

    async def run(self) -> None:
        n = 0
        while not self._stop.is_set():
            started = time.monotonic()
            n += 1
            try:
                body = await self.rig.call(
                    n, "mail_query", {"action": "send_status", "prepared_id": self.pid}, within=30
                )
                ok = "status" in body
            except Exception:
                ok = False
            self.calls.append((started, ok))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 0.25)

    def stop(self) -> None:
        self._stop.set()

    def last_failure_after(self, back: float) -> float | None:
        """Seconds after `back` of the latest call that failed (None if none failed then)."""
        late = [started - back for started, ok in self.calls if not ok and started >= back]
        return round(max(late), 2) if late else None


async def with_fault(
    rig: Rig,
    inject: Callable[[], None],
    restore: Callable[[], None],
    hold_s: float,
    *,
    after_stored: int = 4,
    sends: int = SENDS,
) -> None:
    """Storm all sends, inject the fault mid-storm, hold it, restore it, and judge the run."""
    await rig.prepare_all(sends)
    poller = StatusPoller(rig, rig.sends[0].pid)
    polling = asyncio.ensure_future(poller.run())
    storm = asyncio.ensure_future(rig.storm(rig.sends))
    # The fault meets sends queued for a connection, in flight, and (on a busy machine) confirms
    # still on their way in.
    await rig.stored(after_stored)
    rig.row.open_at_fault = await rig.opened(OPEN_AT_FAULT)
    await asyncio.to_thread(inject)
    await asyncio.sleep(hold_s)
    await asyncio.to_thread(restore)
    back = time.monotonic()
    await storm
    rig.row.close_s = await rig.wait_closed(back)
    poller.stop()
    await polling
    rig.row.last_failure_s = poller.last_failure_after(back)
    rig.row.status_failures = sum(1 for _, ok in poller.calls if not ok)
    await rig.verdict()
    assert rig.row.open_at_fault >= OPEN_AT_FAULT, rig.row  # it met the storm, not its end
    # The pool heals: no status call fails later than a second after the store is back.
    assert rig.row.last_failure_s is None or rig.row.last_failure_s <= 1.0, rig.row
    # Everything confirmed again: what the fault left unsent may go now, once; nothing twice.
    await rig.storm(rig.sends)
    await rig.wait_closed(time.monotonic())
    await rig.verdict(table=False)
    report = await rig.verify()
    assert report["ok"], report["findings"]
