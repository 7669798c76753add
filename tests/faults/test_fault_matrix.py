"""The fault matrix: a real server
process is SIGKILLed or SIGSTOPped at every ledger step, recovery decides, and we check the
projected status, that the SMTP server saw at most one DATA transaction, and that nothing is
ever resent.

All rows run at once so the whole matrix waits for the recovery grace only once (68 s: the
smallest value the configuration rule allows with 1 s leases, see harness.FAST). Kill rows are
recovered by `angelos ledger recover`; pause rows by the background task of a live server in
their namespace, after which the paused dispatcher is resumed (SIGCONT) and must not send.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from faults.harness import (
    GRACE_MS,
    Server,
    confirm,
    ledger_json,
    prepare,
    server_env,
    start_servers,
    status,
)

from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger_events import ANNOTATION_TYPES
from support.services import Services
from support.smtp_sink import Transaction, transactions

pytestmark = pytest.mark.services


class Row(NamedTuple):
    """One row of the matrix: where the process dies or pauses, and what must follow."""

    name: str
    point: str  # TEST_FAULT_POINT, a step named by ledger.dispatch.pipeline.CheckpointName
    mode: str  # exit (SIGKILL) or stop (SIGSTOP, later SIGCONT)
    status: str
    stage: str
    stored: tuple[int, ...]  # messages the SMTP server may have stored (accepted DATA)
    append_sent: bool = False
    sent_filing: str = ""
    late_possible: bool = False  # a resumed dispatcher may learn the outcome after recovery
    queued: bool = False  # the row's send waits behind another that holds the one connection


ROWS = [
    Row("kill after claimed", "after_claim", "exit", "rejected", "not_attempted", (0,)),
    Row(
        "kill after attempt marker", "after_attempt_started", "exit", "rejected", "interrupted",
        (0,),
    ),
    Row(
        "kill while queued", "while_queued", "exit", "rejected", "not_attempted", (0,),
        queued=True,
    ),
    Row("kill mid-body", "mid_body", "exit", "rejected", "interrupted", (0,)),
    Row(
        "kill after commit point", "after_commit_point", "exit", "unknown", "acknowledgement",
        (0,),
    ),
    Row("kill after terminator", "after_terminator", "exit", "unknown", "acknowledgement", (1,)),
    Row(
        "kill during Sent filing", "after_filing_started", "exit", "accepted", "acknowledgement",
        (1,), append_sent=True, sent_filing="unknown",
    ),
    Row("pause after claimed", "after_claim", "stop", "rejected", "not_attempted", (0,)),
    Row(
        "pause while queued", "while_queued", "stop", "rejected", "not_attempted", (0,),
        queued=True,
    ),
    Row("pause mid-body", "mid_body", "stop", "rejected", "interrupted", (0,)),
    Row(
        "pause after commit point", "after_commit_point", "stop", "unknown", "acknowledgement",
        (0, 1), late_possible=True,
    ),
    Row(
        "pause after terminator", "after_terminator", "stop", "unknown", "acknowledgement",
        (1,), late_possible=True,
    ),
]  # fmt: skip


class Outcome(NamedTuple):
    """What happened to one row."""

    pid: str
    rcpt: str
    reached: bool
    status: dict[str, Any]
    types: list[str]
    seen: list[Transaction]
    replay: Any
    resumed_answer: Any
    recovered_by: str
    holder_pid: str  # the send that held the only connection (queued rows), else ""


class Matrix(NamedTuple):
    """The whole run: per-row outcomes plus the CLI answers around recovery."""

    rows: dict[str, Outcome]
    dry_run: Any
    queue: Any
    recover: Any
    verify: dict[str, Any]
    elapsed_s: float
    shown: dict[str, Any]  # `angelos ledger show --json` of every killed row, after recovery


async def _claim_srv_ms(store: LedgerStore, pid: str) -> int:
    _, entries = await store.read(pid)
    return max((e.srv_ms for e in entries if e.t == "claimed"), default=0)


async def _run(services: Services, logs: Path) -> Matrix:
    started = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    env_k = server_env(services, f"fk-{tag}")
    env_p = server_env(services, f"fp-{tag}")
    envs = [
        {
            **(env_k if row.mode == "exit" else env_p),
            "TEST_FAULT_POINT": f"{row.point}:{row.mode}",
            **({"SMTP_MAX_CONNECTIONS": "1"} if row.queued else {}),
        }
        for row in ROWS
    ]
    servers = await asyncio.to_thread(start_servers, [*envs, env_p], logs)
    *faulty, survivor_p = servers
    client = connect(services.redis_url)
    stores = {
        "exit": LedgerStore(client, LedgerSettings(namespace=env_k["SEND_LEDGER_NAMESPACE"])),
        "stop": LedgerStore(client, LedgerSettings(namespace=env_p["SEND_LEDGER_NAMESPACE"])),
    }
    survivor_k: Server | None = None
    try:
        rcpts = [f"fm{n}-{tag}@example.test" for n in range(len(ROWS))]
        previews = await asyncio.gather(
            *(prepare(s.url, r) for s, r in zip(faulty, rcpts, strict=True))
        )
        holders = {
            n: await _hold_the_connection(faulty[n], stores[row.mode], tag)
            for n, row in enumerate(ROWS)
            if row.queued
        }
        calls = [
            asyncio.create_task(confirm(s.url, p, append_sent=row.append_sent))
            for s, p, row in zip(faulty, previews, ROWS, strict=True)
        ]
        reached = await asyncio.gather(
            *(_reach(s, c, row) for s, c, row in zip(faulty, calls, ROWS, strict=True))
        )
        pids = [p["prepared_id"] for p in previews]

        # Before the grace: the CLI sees the open claims but recovery may not touch them.
        dry_run = await asyncio.to_thread(ledger_json, env_k, "recover", "--dry-run")
        queue = await asyncio.to_thread(ledger_json, env_k, "list", "--status", "sending")

        claims = [
            await _claim_srv_ms(stores[row.mode], pid) for row, pid in zip(ROWS, pids, strict=True)
        ]
        due = max(claims) + GRACE_MS + 500
        await asyncio.sleep(max(0, due - await stores["exit"].server_time_ms()) / 1000)
        recover = await asyncio.to_thread(ledger_json, env_k, "recover")

        # Pause rows: the live server's background task decides, then the dispatcher wakes up.
        resumed: dict[int, Any] = {}
        for n, row in enumerate(ROWS):
            if row.mode != "stop" or not reached[n]:
                continue
            await _until_recovered(survivor_p.url, pids[n])
            faulty[n].resume()
            try:
                resumed[n] = await asyncio.wait_for(asyncio.shield(calls[n]), 30)
            except Exception as exc:  # the answer itself is not what this test is about
                resumed[n] = repr(exc)
        await asyncio.sleep(1.0)  # let a late annotation land

        survivor_k = (await asyncio.to_thread(start_servers, [env_k], logs / "k"))[0]
        rows: dict[str, Outcome] = {}
        for n, row in enumerate(ROWS):
            url = (survivor_k if row.mode == "exit" else survivor_p).url
            now_status = await status(url, pids[n])
            replay = await confirm(url, previews[n], append_sent=row.append_sent)
            _, entries = await stores[row.mode].read(pids[n])
            rows[row.name] = Outcome(
                pid=pids[n],
                rcpt=rcpts[n],
                reached=reached[n],
                status=now_status,
                types=[e.t for e in entries],
                seen=transactions(services.smtp_spool, rcpt=rcpts[n]),
                replay=replay,
                resumed_answer=resumed.get(n),
                recovered_by=next(
                    (
                        _actor(e.e)
                        for e in entries
                        if e.t in ("recovery_classified", "sent_filing_failed")
                    ),
                    "",
                ),
                holder_pid=holders[n][0] if n in holders else "",
            )
        await asyncio.sleep(0.5)  # no second session may ever appear
        rows = {
            name: o._replace(seen=transactions(services.smtp_spool, rcpt=o.rcpt))
            for name, o in rows.items()
        }
        verify = {
            "exit": await asyncio.to_thread(ledger_json, env_k, "verify"),
            "stop": await asyncio.to_thread(ledger_json, env_p, "verify"),
        }
        shown = dict(
            zip(
                (row.name for row in ROWS if row.mode == "exit"),
                await asyncio.gather(
                    *(
                        asyncio.to_thread(ledger_json, env_k, "show", rows[row.name].pid)
                        for row in ROWS
                        if row.mode == "exit"
                    )
                ),
                strict=True,
            )
        )
        for task in [*calls, *(task for _, task in holders.values())]:
            task.cancel()
        elapsed = time.monotonic() - started
        return Matrix(rows, dry_run, queue, recover, verify, elapsed, shown)
    finally:
        for server in [*servers, *([survivor_k] if survivor_k else [])]:
            server.stop()
        await client.aclose()


async def _hold_the_connection(
    server: Server, store: LedgerStore, tag: str
) -> tuple[str, asyncio.Task[Any]]:
    """Start a send whose recipient stalls its RCPT reply, holding the server's one connection.

    Returns once its attempt marker is in the ledger, so a send confirmed next must queue.
    """
    preview = await prepare(server.url, f"stall-20@h{tag}.example.test")
    task = asyncio.create_task(confirm(server.url, preview))
    for _ in range(600):
        _, entries = await store.read(preview["prepared_id"])
        if "smtp_attempt_started" in [e.t for e in entries]:
            return preview["prepared_id"], task
        await asyncio.sleep(0.05)
    raise AssertionError("the holding send never started its attempt")


def _actor(e: str) -> str:
    return e.split('"actor":"', 1)[1].split(":", 1)[0] if '"actor":"' in e else ""


async def _reach(server: Server, task: asyncio.Task[Any], row: Row) -> bool:
    """Wait until the server died or stopped at its fault point; False when the send just ran."""
    wanted = "dead" if row.mode == "exit" else "T"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if await server.wait_state(wanted, 0.1):
            return True
        if task.done():
            # A kill also ends the call; only a process still running afterwards never got there.
            if await server.wait_state(wanted, 2.0):
                return True
            await asyncio.to_thread(server.stop)
            return False
    return False


async def _until_recovered(url: str, pid: str) -> None:
    for _ in range(100):
        answer = await status(url, pid)
        if answer.get("recovered") or answer.get("sent_filing") == "unknown":
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"recovery did not close {pid}")


@pytest.fixture(scope="module")
def matrix(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    logs = tmp_path_factory.mktemp("fault-matrix")
    (logs / "k").mkdir()
    with ThreadPoolExecutor(1) as pool:  # its own event loop, outside any test's loop
        result = pool.submit(asyncio.run, _run(services, logs)).result()
    print(_table(result))
    yield result


def _table(result: Matrix) -> str:
    lines = [
        f"fault matrix in {result.elapsed_s:.0f} s",
        "| step killed or paused | status after recovery | SMTP DATA transactions (stored) |",
        "| --- | --- | --- |",
    ]
    for row in ROWS:
        o = result.rows[row.name]
        shown = o.status.get("status", "?") + (
            f" / {o.status['stage']}" if "stage" in o.status else ""
        )
        if o.status.get("sent_filing"):
            shown += f", sent_filing {o.status['sent_filing']}"
        if "late_outcome_observed" in o.types:
            shown += ", late_outcome_observed"
        data = [t for t in o.seen if t.data_started_at is not None]
        stored = sum(t.stored for t in o.seen)
        reached = "" if o.reached else " (fault point not reached)"
        lines.append(f"| {row.name}{reached} | {shown} | {len(data)} ({stored}) |")
    return "\n".join(lines)


def _row(matrix: Matrix, row: Row) -> Outcome:
    outcome = matrix.rows[row.name]
    if not outcome.reached:
        pytest.fail(f"the server never reached {row.point}")
    return outcome


KILLED = [row for row in ROWS if row.mode == "exit"]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
class TestEveryLedgerStep:
    def test_the_projected_status_is_the_conservative_one(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        expected = {"status": row.status, "stage": row.stage}
        assert expected == {k: outcome.status.get(k) for k in expected}, outcome.types
        if row.sent_filing:
            assert row.sent_filing == outcome.status.get("sent_filing")
        else:
            assert outcome.status.get("recovered") is True
            assert "recovery" == outcome.recovered_by

    def test_the_smtp_server_saw_at_most_one_data_transaction(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        data = [t for t in outcome.seen if t.data_started_at is not None]
        assert len(data) <= 1
        assert sum(t.stored for t in outcome.seen) in row.stored
        assert len(outcome.seen) <= 1  # never a second session of any kind

    def test_a_reconfirm_replays_and_nothing_is_resent(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        assert False is outcome.replay.get("resent"), outcome.replay
        assert outcome.status["status"] == outcome.replay["status"]

    def test_the_lifecycle_ends_where_recovery_put_it(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        lifecycle = [t for t in outcome.types if t not in ANNOTATION_TYPES]
        closing = "sent_filing_failed" if row.sent_filing else "recovery_classified"
        assert closing == lifecycle[-1]
        assert 1 == outcome.types.count(closing)


PAUSED = [r for r in ROWS if r.mode == "stop"]


@pytest.mark.parametrize("row", PAUSED, ids=[r.name for r in PAUSED])
class TestResumedDispatchers:
    def test_a_resumed_dispatcher_never_sends_what_recovery_closed_before_the_commit_point(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        if row.stored == (0,):
            assert [] == [t for t in outcome.seen if t.stored]
            assert all(t.terminator_at is None for t in outcome.seen)

    def test_a_definitive_outcome_learned_after_recovery_is_recorded_as_late(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        learned = any(t.stored for t in outcome.seen)
        if not (row.late_possible and learned):
            assert "late_outcome_observed" not in outcome.types
            return
        assert 1 == outcome.types.count("late_outcome_observed")


QUEUED = [r for r in ROWS if r.queued]


@pytest.mark.parametrize("row", QUEUED, ids=[r.name for r in QUEUED])
class TestDispatchesThatDiedWaitingForAConnection:
    def test_the_ledger_shows_the_wait_and_no_attempt_marker(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        assert "dispatch_queued" in outcome.types
        assert "smtp_attempt_started" not in outcome.types

    def test_no_byte_of_the_queued_message_reached_the_smtp_server(
        self, matrix: Matrix, row: Row
    ) -> None:
        assert [] == _row(matrix, row).seen


class TestAroundRecovery:
    @pytest.mark.parametrize("row", KILLED, ids=[r.name for r in KILLED])
    def test_show_concludes_what_the_last_durable_step_proves(
        self, matrix: Matrix, row: Row
    ) -> None:
        said = matrix.shown[row.name]["conclusion"]
        if row.status == "rejected":
            assert "provably" in said and "may have" not in said, said
        else:
            assert "may have been" in said or "accepted" in said, said
            assert "provably" not in said, said
        assert "resend" not in said.replace("never resend", ""), said

    def test_recovery_inside_the_grace_touches_nothing(self, matrix: Matrix) -> None:
        assert [] == [d for d in matrix.dry_run["decisions"] if d["action"] != "too_early"]

    def test_the_incident_queue_lists_the_abandoned_claims(self, matrix: Matrix) -> None:
        listed = {item["prepared_id"] for item in matrix.queue["sends"]}
        # A dispatch killed during Sent filing is already `accepted`: not in the sending queue.
        abandoned = {
            o.pid for r, o in ((r, matrix.rows[r.name]) for r in ROWS)
            if r.mode == "exit" and o.reached and r.point != "after_filing_started"
        }  # fmt: skip
        assert abandoned <= listed

    def test_the_cli_recovery_closed_every_killed_dispatch(self, matrix: Matrix) -> None:
        decided = {d["pid"] for d in matrix.recover["decisions"] if d["action"] == "classified"}
        killed = {
            pid for r, o in ((r, matrix.rows[r.name]) for r in ROWS)
            if r.mode == "exit" and o.reached for pid in (o.pid, o.holder_pid) if pid
        }  # fmt: skip
        assert killed == decided

    @pytest.mark.parametrize("mode", ["exit", "stop"])
    def test_verify_passes_on_every_stream_the_matrix_produced(
        self, matrix: Matrix, mode: str
    ) -> None:
        report = matrix.verify[mode]
        assert (True, []) == (report["ok"], report["findings"])

    def test_the_whole_matrix_fits_in_a_few_minutes(self, matrix: Matrix) -> None:
        assert matrix.elapsed_s < 240
