"""The fault matrix: a real server
process is SIGKILLed or SIGSTOPped at every ledger step, recovery decides, and we check the
projected status, that the SMTP server saw at most one DATA transaction, and that nothing is
ever resent.

All rows run at once so the whole matrix waits for the recovery grace only once (68 s: the
smallest value the configuration rule allows with 1 s leases, see harness.FAST). Kill rows are
recovered by `angelos ledger recover`; pause rows by the background task of a live server in
their namespace, after which the paused dispatcher is resumed (SIGCONT) and must not send.
What both matrices share is in tests/faults/matrix.py (the run) and matrix_checks.py (checks).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults.harness import Server, confirm, prepare, server_env
from faults.matrix import BEFORE_THE_TRANSPORT, Matrix, Row, Sends, conclude, fleet, run_apart
from faults.matrix_checks import AroundRecovery, DiedWaiting, EveryLedgerStep, by_row

from ledger.store.ledger_store import LedgerStore
from support.services import Services
from support.smtp_sink import Transaction, transactions

pytestmark = pytest.mark.services


ROWS = [
    *BEFORE_THE_TRANSPORT["exit"],
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
    *BEFORE_THE_TRANSPORT["stop"],
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
PAUSED = [r for r in ROWS if r.mode == "stop"]
QUEUED = [r for r in ROWS if r.queued]

Run = Matrix[list[Transaction]]  # a run of this matrix: a row's `seen` is its sink transactions


async def _run(services: Services, logs: Path, url: str) -> Run:
    started = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    env_k = server_env(services, f"fk-{tag}", ANGELOS_REDIS_URL=url)
    env_p = server_env(services, f"fp-{tag}", ANGELOS_REDIS_URL=url)
    async with fleet(services, ROWS, env_k, env_p, logs, _one_connection) as run:
        rcpts = [f"fm{n}-{tag}@example.test" for n in range(len(ROWS))]
        previews = await run.prepare(rcpts)
        holders = {
            n: await _hold_the_connection(run.faulty[n], run.stores[row.mode], tag)
            for n, row in enumerate(ROWS)
            if row.queued
        }
        calls = [run.dispatch(n, p) for n, p in enumerate(previews)]
        reached = await asyncio.gather(*(run.reach(n, c) for n, c in enumerate(calls)))
        sends = Sends(
            rcpts,
            previews,
            calls,
            list(reached),
            {n: (pid,) for n, (pid, _) in holders.items()},
            [task for _, task in holders.values()],
        )
        return await conclude(
            run,
            sends,
            started=started,
            settled=lambda n: run.until_recovered(sends.pids[n]),
            saw=lambda n: transactions(services.smtp_spool, rcpt=rcpts[n]),
        )


def _one_connection(row: Row) -> dict[str, str]:
    """A queued row's server has one SMTP connection, which the holding send takes."""
    return {"SMTP_MAX_CONNECTIONS": "1"} if row.queued else {}


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


@pytest.fixture(scope="module", params=["redis", "cluster"])
def matrix(
    services: Services, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Run]:
    """The matrix on one Redis, then on the shared 3-primary Redis Cluster."""
    logs = tmp_path_factory.mktemp(f"fault-matrix-{request.param}")
    url = services.cluster_url if request.param == "cluster" else services.redis_url
    column = "SMTP DATA transactions (stored)"
    title = f"fault matrix ({request.param})"
    yield run_apart(_run(services, logs, url), title, column, _data_and_stored)


def _data_and_stored(seen: list[Transaction]) -> str:
    data = [t for t in seen if t.data_started_at is not None]
    return f"{len(data)} ({sum(t.stored for t in seen)})"


@by_row(ROWS)
class TestEveryLedgerStep(EveryLedgerStep):
    def test_the_smtp_server_saw_at_most_one_data_transaction(self, matrix: Run, row: Row) -> None:
        outcome = matrix.reached(row)
        data = [t for t in outcome.seen if t.data_started_at is not None]
        assert len(data) <= 1
        assert sum(t.stored for t in outcome.seen) in row.messages
        assert len(outcome.seen) <= 1  # never a second session of any kind


@by_row(PAUSED)
class TestResumedDispatchers:
    def test_a_resumed_dispatcher_never_sends_what_recovery_closed_before_the_commit_point(
        self, matrix: Run, row: Row
    ) -> None:
        outcome = matrix.reached(row)
        if row.messages == (0,):
            assert [] == [t for t in outcome.seen if t.stored]
            assert all(t.terminator_at is None for t in outcome.seen)

    def test_a_definitive_outcome_learned_after_recovery_is_recorded_as_late(
        self, matrix: Run, row: Row
    ) -> None:
        outcome = matrix.reached(row)
        learned = any(t.stored for t in outcome.seen)
        if not (row.late_possible and learned):
            assert "late_outcome_observed" not in outcome.types
            return
        assert 1 == outcome.types.count("late_outcome_observed")


@by_row(QUEUED)
class TestDispatchesThatDiedWaitingForAConnection(DiedWaiting):
    def test_no_byte_of_the_queued_message_reached_the_smtp_server(
        self, matrix: Run, row: Row
    ) -> None:
        assert [] == matrix.reached(row).seen


class TestAroundRecovery(AroundRecovery):
    rows = ROWS
