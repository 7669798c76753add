"""What the two fault matrices share (test_fault_matrix.py for SMTP, test_graph_fault_matrix.py
for Microsoft Graph): one faulty `angelos serve` per row, killed (SIGKILL) or paused (SIGSTOP)
at its step, recovery after the grace, the replays and CLI answers read back (the checks that
hold whatever the transport are in matrix_checks.py). Each test file keeps its row table (the
steps before the transport are the same rows in both), how it starts its peers and counts what
they received, and its transport's own checks.

All rows run at once so a matrix waits for the recovery grace only once (68 s: the smallest
value the configuration rule allows with 1 s leases, see harness.FAST). Kill rows are recovered
by `angelos ledger recover`; pause rows by the background task of a live server in their
namespace, after which the paused dispatcher is resumed (SIGCONT) and must not send.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

import msgspec
import pytest
from faults.harness import GRACE_MS, Server, confirm, ledger_json, prepare, start_servers, status

from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger import decode_event
from support.services import Services

S = TypeVar("S")  # what the transport's peer saw of one row
# The events that close a lifecycle in recovery (Sent filing: only a send that asked for it).
CLOSERS = ("recovery_classified", "sent_filing_failed")


@dataclass(frozen=True)
class Row:
    """One row of a matrix: where the process dies or pauses, and what must follow."""

    name: str
    point: str  # TEST_FAULT_POINT, a step named by ledger.dispatch.pipeline.CheckpointName
    mode: str  # exit (SIGKILL) or stop (SIGSTOP, later SIGCONT)
    verdict: str  # recovery's: rejected or unknown; accepted if recorded before the kill
    stage: str
    messages: tuple[int, ...]  # how many the peer may have accepted (SMTP stored, Graph 202)
    _: KW_ONLY
    append_sent: bool = False
    sent_filing: str = ""  # what recovery leaves of a Sent filing the send asked for
    evidence: bool = False  # the peer's Sent Items holds a copy before recovery searches
    late_possible: bool = False  # a resumed dispatcher may learn the outcome after recovery
    queued: bool = False  # the row's send waits behind others that hold the transport

    @property
    def status(self) -> str:
        """The public status once recovery (and its search of Sent Items) is done."""
        return "accepted" if self.evidence else self.verdict

    @property
    def projected(self) -> dict[str, Any]:
        """The send_status fields recovery leaves: it closes every send but one already accepted
        before the kill, whose Sent filing it closes instead; a copy found in Sent Items is the
        evidence of an accepted send."""
        closed = {"sent_filing": self.sent_filing} if self.sent_filing else {"recovered": True}
        evidence = "sent_copy" if self.evidence else None
        return {"status": self.status, "stage": self.stage, **closed, "evidence": evidence}

    @property
    def closing(self) -> dict[str, int]:
        """The events that end the lifecycle, in order, and how often each appears (0: never)."""
        closer = "sent_filing_failed" if self.sent_filing else "recovery_classified"
        return {closer: 1, "outcome_evidence": 1 if self.evidence else 0}


# The steps before a dispatch touches its transport, by mode: the same rows in every matrix.
# Killed or paused there, a send is provably not made.
BEFORE_THE_TRANSPORT = {
    "exit": [
        Row("kill after claimed", "after_claim", "exit", "rejected", "not_attempted", (0,)),
        Row(
            "kill after attempt marker", "after_attempt_started", "exit", "rejected",
            "interrupted", (0,),
        ),
        Row(
            "kill while queued", "while_queued", "exit", "rejected", "not_attempted", (0,),
            queued=True,
        ),
    ],
    "stop": [
        Row("pause after claimed", "after_claim", "stop", "rejected", "not_attempted", (0,)),
        Row(
            "pause while queued", "while_queued", "stop", "rejected", "not_attempted", (0,),
            queued=True,
        ),
    ],
}  # fmt: skip


class Outcome(NamedTuple, Generic[S]):
    """What happened to one row."""

    row: Row
    pid: str
    rcpt: str
    reached: bool
    status: dict[str, Any]
    types: list[str]
    data: list[dict[str, Any]]  # each entry's event data, in stream order
    replay: Any
    resumed_answer: Any
    recovered_by: str
    holder_pids: tuple[str, ...]  # the sends a queued row waited behind, else ()
    seen: S  # what the peer received for this row (read after every step)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The data of this row's events of one type, in stream order."""
        return [d for t, d in zip(self.types, self.data, strict=True) if t == kind]


class Matrix(NamedTuple, Generic[S]):
    """The whole run: per-row outcomes plus the CLI answers around recovery."""

    rows: dict[str, Outcome[S]]
    dry_run: Any
    queue: Any
    recovers: list[Any]  # each `angelos ledger recover` after the grace, in order
    verify: dict[str, Any]
    elapsed_s: float
    shown: dict[str, Any]  # `angelos ledger show --json` of every killed row, after recovery
    strays: int = 0  # requests off the peer's contract (a contract double counts them)

    def reached(self, row: Row) -> Outcome[S]:
        """The row's outcome; the test fails when its server never reached the fault point."""
        outcome = self.rows[row.name]
        if not outcome.reached:
            pytest.fail(f"the server never reached {row.point}")
        return outcome

    def killed(self) -> list[Outcome[S]]:
        """The outcomes of the kill rows whose server reached its fault point."""
        return [o for o in self.rows.values() if o.row.mode == "exit" and o.reached]


class Sends(NamedTuple):
    """A matrix's sends once every row's server reached its fault point (or ran through)."""

    rcpts: list[str]
    previews: list[dict[str, Any]]
    calls: list[asyncio.Task[Any]]  # each row's mail_send_confirmed
    reached: list[bool]
    holders: dict[int, tuple[str, ...]]  # by queued row: the prepared_ids it waits behind
    holding: list[asyncio.Task[Any]]  # their calls

    @property
    def pids(self) -> list[str]:
        """Each row's prepared_id."""
        return [p["prepared_id"] for p in self.previews]


@dataclass
class Fleet:
    """A matrix's servers: one faulty server a row, a live one in the pause rows' namespace (its
    background task recovers them), later a live one in the kill rows' (for their replays)."""

    rows: Sequence[Row]
    envs: dict[str, dict[str, str]]  # by mode: the kill rows' ledger, the pause rows'
    logs: Path
    faulty: list[Server]
    survivor_p: Server
    stores: dict[str, LedgerStore]
    survivor_k: Server | None = None

    def url(self, row: Row) -> str:
        """The live server that answers for the row's ledger."""
        live = self.survivor_k if row.mode == "exit" else self.survivor_p
        assert live is not None, "the kill rows' live server starts after recovery"
        return live.url

    async def until_recovered(self, pid: str) -> None:
        """Wait until the pause rows' live server reports that recovery closed a send (or, for
        one that asked for it, its Sent filing)."""
        for _ in range(100):
            answer = await status(self.survivor_p.url, pid)
            if answer.get("recovered") or answer.get("sent_filing") == "unknown":
                return
            await asyncio.sleep(0.3)
        raise AssertionError(f"recovery did not close {pid}")

    async def ledger(self, mode: str, *args: str) -> Any:
        """`angelos ledger … --json` on the kill (exit) or pause (stop) rows' ledger."""
        return await asyncio.to_thread(ledger_json, self.envs[mode], *args)

    async def prepare(self, rcpts: list[str]) -> list[dict[str, Any]]:
        """mail_prepare one message a row, to the row's recipient, on the row's server."""
        return list(
            await asyncio.gather(
                *(prepare(s.url, r) for s, r in zip(self.faulty, rcpts, strict=True))
            )
        )

    def dispatch(self, n: int, preview: dict[str, Any]) -> asyncio.Task[Any]:
        """Confirm row n's preview on its faulty server, in a task."""
        row = self.rows[n]
        return asyncio.create_task(
            confirm(self.faulty[n].url, preview, append_sent=row.append_sent)
        )

    async def reach(self, n: int, task: asyncio.Task[Any]) -> bool:
        """Wait until row n's server died or stopped at its fault point; False when the send
        just ran."""
        server = self.faulty[n]
        wanted = "dead" if self.rows[n].mode == "exit" else "T"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if await server.wait_state(wanted, 0.1):
                return True
            if task.done():
                # A kill also ends the call; only a process still running afterwards never got
                # there.
                if await server.wait_state(wanted, 2.0):
                    return True
                await asyncio.to_thread(server.stop)
                return False
        return False


@contextlib.asynccontextmanager
async def fleet(
    services: Services,
    rows: Sequence[Row],
    env_k: dict[str, str],
    env_p: dict[str, str],
    logs: Path,
    extra: Callable[[Row], dict[str, str]] = lambda row: {},
) -> AsyncIterator[Fleet]:
    """Start a faulty server a row (its environment plus `extra(row)`) and the pause rows' live
    server; stop every server the run started when it ends."""
    (logs / "k").mkdir()
    envs = [
        {**(env_k if row.mode == "exit" else env_p), "TEST_FAULT_POINT": f"{row.point}:{row.mode}"}
        | extra(row)
        for row in rows
    ]
    servers = await asyncio.to_thread(start_servers, [*envs, env_p], logs)
    *faulty, survivor_p = servers
    client = connect(env_k.get("ANGELOS_REDIS_URL", services.redis_url))
    stores = {
        "exit": LedgerStore(client, LedgerSettings(namespace=env_k["SEND_LEDGER_NAMESPACE"])),
        "stop": LedgerStore(client, LedgerSettings(namespace=env_p["SEND_LEDGER_NAMESPACE"])),
    }
    run = Fleet(rows, {"exit": env_k, "stop": env_p}, logs, faulty, survivor_p, stores)
    try:
        yield run
    finally:
        for server in [*servers, *([run.survivor_k] if run.survivor_k else [])]:
            server.stop()
        await client.aclose()


async def conclude(
    run: Fleet,
    sends: Sends,
    *,
    started: float,
    settled: Callable[[int], Awaitable[None]],
    saw: Callable[[int], S],
    passes: int = 1,
) -> Matrix[S]:
    """From the open claims to the verdicts: the CLI before the grace, `passes` runs of
    `angelos ledger recover` after it, the pause rows resumed once `settled(n)` (their live
    server's recovery is done), then every row's status, replay and stream, and what the peer
    saw of row n (`saw(n)`, once no second session or request may still appear)."""
    rows, pids = run.rows, sends.pids
    # Before the grace: the CLI sees the open claims but recovery may not touch them.
    dry_run = await run.ledger("exit", "recover", "--dry-run")
    queue = await run.ledger("exit", "list", "--status", "sending")

    claims = [
        await _claim_srv_ms(run.stores[row.mode], pid) for row, pid in zip(rows, pids, strict=True)
    ]
    due = max(claims) + GRACE_MS + 500
    await asyncio.sleep(max(0, due - await run.stores["exit"].server_time_ms()) / 1000)
    recovers = [await run.ledger("exit", "recover") for _ in range(passes)]

    # Pause rows: the live server's background task decides, then the dispatcher wakes up.
    resumed: dict[int, Any] = {}
    for n, row in enumerate(rows):
        if row.mode != "stop" or not sends.reached[n]:
            continue
        await settled(n)
        run.faulty[n].resume()
        try:
            resumed[n] = await asyncio.wait_for(asyncio.shield(sends.calls[n]), 30)
        except Exception as exc:  # the answer itself is not what this test is about
            resumed[n] = repr(exc)
    await asyncio.sleep(1.0)  # let a late annotation land

    run.survivor_k = (await asyncio.to_thread(start_servers, [run.envs["exit"]], run.logs / "k"))[0]
    read = []
    for n, row in enumerate(rows):
        now_status = await status(run.url(row), pids[n])
        replay = await confirm(run.url(row), sends.previews[n], append_sent=row.append_sent)
        _, entries = await run.stores[row.mode].read(pids[n])
        read.append((now_status, replay, entries))
    await asyncio.sleep(0.5)  # no second session or request may ever appear
    outcomes = {
        row.name: Outcome(
            row=row,
            pid=pids[n],
            rcpt=sends.rcpts[n],
            reached=sends.reached[n],
            status=now_status,
            types=[e.t for e in entries],
            data=[_data(e.e) for e in entries],
            replay=replay,
            resumed_answer=resumed.get(n),
            recovered_by=next((_actor(e.e) for e in entries if e.t in CLOSERS), ""),
            holder_pids=sends.holders.get(n, ()),
            seen=saw(n),
        )
        for n, (row, (now_status, replay, entries)) in enumerate(zip(rows, read, strict=True))
    }
    verify = {mode: await run.ledger(mode, "verify") for mode in ("exit", "stop")}
    killed = [o for o in outcomes.values() if o.row.mode == "exit"]
    shown = await asyncio.gather(*(run.ledger("exit", "show", o.pid) for o in killed))
    for task in [*sends.calls, *sends.holding]:
        task.cancel()
    elapsed = time.monotonic() - started
    named = dict(zip((o.row.name for o in killed), shown, strict=True))
    return Matrix(outcomes, dry_run, queue, recovers, verify, elapsed, named)


async def _claim_srv_ms(store: LedgerStore, pid: str) -> int:
    _, entries = await store.read(pid)
    return max((e.srv_ms for e in entries if e.t == "claimed"), default=0)


def _actor(e: str) -> str:
    return e.split('"actor":"', 1)[1].split(":", 1)[0] if '"actor":"' in e else ""


def _data(e: str) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(decode_event(e).data)
    return data


def run_apart(
    run: Coroutine[Any, Any, Matrix[S]], title: str, column: str, cell: Callable[[S], str]
) -> Matrix[S]:
    """Run a matrix in its own event loop (and its doubles'), outside any test's; print its
    table: each row's status after recovery and `cell(seen)`, what the peer received (`column`)."""
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(asyncio.run, run).result()
    lines = [
        f"{title} in {result.elapsed_s:.0f} s",
        f"| step killed or paused | status after recovery | {column} |",
        "| --- | --- | --- |",
    ]
    for o in result.rows.values():
        reached = "" if o.reached else " (fault point not reached)"
        lines.append(f"| {o.row.name}{reached} | {_shown(o)} | {cell(o.seen)} |")
    print("\n".join(lines))
    return result


def _shown(o: Outcome[Any]) -> str:
    shown = str(o.status.get("status", "?")) + (
        f" / {o.status['stage']}" if "stage" in o.status else ""
    )
    if o.status.get("evidence"):
        shown += f" (evidence {o.status['evidence']})"
    if o.status.get("sent_filing"):
        shown += f", sent_filing {o.status['sent_filing']}"
    if "late_outcome_observed" in o.types:
        shown += ", late_outcome_observed"
    return shown
