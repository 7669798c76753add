"""The fault matrix for Microsoft Graph: a real `microsoft` server process is SIGKILLed or
SIGSTOPped at every ledger step of a Graph dispatch, recovery decides, and we check the
projected status, that the Graph double received at most one `POST /me/sendMail` for the
preparation (ever: after a resume and a replay too), and that nothing is ever resent.

The servers are real `angelos serve --transport http` processes (tests/faults/harness.py) whose
pinned hosts graph.microsoft.com and login.microsoftonline.com are rerouted to the token
endpoint double and the Graph double (tests/support/graph_deploy.py) running in this matrix's
own event loop: fault_server.py installs the reroute from TEST_PINNED_ROUTES. For Graph the
dispatch steps are: the claim, the attempt marker, the `/me` check (`mid_body` is after it, the
last moment before the commit point), the commit point, and the one sendMail request (the
"terminator" is its 202). Every sendMail is counted at the double, by the row's own recipient.

Graph files every message it accepts in Sent Items, so a `microsoft` deployment's recovery does
one more thing than the SMTP matrix's: an unknown send joins the evidence work list when it is
classified, and recovery's next pass searches Sent Items for its Message-ID. A copy proves the
send was accepted (`outcome_evidence`: public status `accepted`, evidence `sent_copy`, the stage
recovery gave it stays); absence proves nothing and the send stays unknown. The kill rows get
that pass from a second `angelos ledger recover`, the pause rows from the live server's
background task, before their dispatcher is resumed.

All rows run at once so the matrix waits for the recovery grace only once (68 s, harness.FAST).
What both matrices share is in tests/faults/matrix.py (the run) and matrix_checks.py (checks);
the Graph side (the double's counts, the held slots, the search wait) is in graph_peers.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from faults.graph_peers import (
    graph_env,
    hold_both_slots,
    queued_for,
    requests_for,
    route_plan,
    searches_for,
    until_idle,
    until_searched,
)
from faults.matrix import BEFORE_THE_TRANSPORT, Matrix, Row, Sends, conclude, fleet, run_apart
from faults.matrix_checks import AroundRecovery, DiedWaiting, EveryLedgerStep, by_row

from support.graph_deploy import graph_rig
from support.graph_double import Exchange
from support.services import Services

pytestmark = pytest.mark.services


ROWS = [
    *BEFORE_THE_TRANSPORT["exit"],
    Row("kill mid-body (after /me)", "mid_body", "exit", "rejected", "interrupted", (0,)),
    Row(
        "kill after commit point", "after_commit_point", "exit", "unknown", "graph_submission",
        (0,),
    ),
    Row(
        "kill after terminator (202)", "after_terminator", "exit", "unknown", "graph_submission",
        (1,), evidence=True,
    ),
    *BEFORE_THE_TRANSPORT["stop"],
    Row("pause mid-body (after /me)", "mid_body", "stop", "rejected", "interrupted", (0,)),
    Row(
        "pause after commit point", "after_commit_point", "stop", "unknown", "graph_submission",
        (0, 1), late_possible=True,
    ),
    Row(
        "pause after terminator (202)", "after_terminator", "stop", "unknown",
        "graph_submission", (1,), evidence=True, late_possible=True,
    ),
]  # fmt: skip
PAUSED = [r for r in ROWS if r.mode == "stop"]
QUEUED = [r for r in ROWS if r.queued]
UNKNOWN = [r for r in ROWS if r.verdict == "unknown"]
REJECTED = [r for r in ROWS if r.verdict == "rejected"]


class Seen(NamedTuple):
    """What the Graph double received for one row."""

    requests: list[Exchange]  # the sendMail requests carrying this row's message
    sent: int  # messages the double queued for this row (sendMail answered 202)
    searches: int  # recovery's searches of Sent Items for this row's Message-ID
    holders_sent: int  # sendMail requests of the sends it queued behind (none may ever be made)


Run = Matrix[Seen]  # a run of this matrix; `strays`: requests off the Graph contract


async def _run(services: Services, logs: Path) -> Run:
    started = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    async with graph_rig(services) as rig:
        double = rig.double
        routes = route_plan(rig, services, logs / "routes.json")
        env_k = graph_env(rig, routes)
        env_p = graph_env(rig, routes)
        async with fleet(services, ROWS, env_k, env_p, logs) as run:
            rcpts = [f"gm{n}-{tag}@example.test" for n in range(len(ROWS))]
            previews = await run.prepare(rcpts)
            calls: dict[int, asyncio.Task[Any]] = {}
            reached: dict[int, bool] = {}

            # Queued rows first: two sends whose `/me` check the double holds take both slots,
            # the row's send queues behind them and dies or stops there. The held checks count
            # against the mailbox's four concurrent requests, so every other row waits for
            # them to end before it confirms.
            queued = [n for n, row in enumerate(ROWS) if row.queued]
            holders = await hold_both_slots(double, run, queued, tag)
            for n in queued:
                calls[n] = run.dispatch(n, previews[n])
            for n in queued:
                reached[n] = await run.reach(n, calls[n])
            await until_idle(double)

            rest = [n for n, row in enumerate(ROWS) if not row.queued]
            for n in rest:
                calls[n] = run.dispatch(n, previews[n])
            for n, done in zip(
                rest, await asyncio.gather(*(run.reach(n, calls[n]) for n in rest)), strict=True
            ):
                reached[n] = done
            sends = Sends(
                rcpts,
                previews,
                [calls[n] for n in range(len(ROWS))],
                [reached[n] for n in range(len(ROWS))],
                {n: tuple(h.pid for h in hs) for n, hs in holders.items()},
                [h.task for hs in holders.values() for h in hs if h.task is not None],
            )

            # Pause rows: the live server's background task classifies and searches, then the
            # dispatcher wakes up. A dispatcher paused after the commit point makes its one
            # request only now, after that search found nothing: its send stays unknown (the
            # next search is 15 minutes on) and what it learns is recorded as late.
            async def settled(n: int) -> None:
                for pid in (sends.pids[n], *sends.holders.get(n, ())):
                    await run.until_recovered(pid)
                    await until_searched(run.stores["stop"], pid)

            def saw(n: int) -> Seen:  # what the double saw, after every step
                return Seen(
                    requests=requests_for(double, rcpts[n]),
                    sent=queued_for(double, rcpts[n]),
                    searches=searches_for(double, previews[n]["message_id"]),
                    holders_sent=sum(len(requests_for(double, h.rcpt)) for h in holders.get(n, ())),
                )

            # The unknown sends join the evidence work list as they are classified: the next
            # `angelos ledger recover` searches Sent Items for each (reading, never sending).
            found = await conclude(run, sends, started=started, settled=settled, saw=saw, passes=2)
            return found._replace(strays=len(double.strays))


@pytest.fixture(scope="module")
def matrix(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if not services.graph_user:
        pytest.skip("this scripts/test-services run has no Graph user (MAILTEST_GRAPH_USER)")
    logs = tmp_path_factory.mktemp("graph-fault-matrix")
    column = "sendMail requests (queued)"
    yield run_apart(_run(services, logs), "Graph fault matrix", column, _requests_and_queued)


def _requests_and_queued(seen: Seen) -> str:
    return f"{len(seen.requests)} ({seen.sent})"


@by_row(ROWS)
class TestEveryLedgerStep(EveryLedgerStep):
    def test_recovery_classified_from_the_last_durable_step(self, matrix: Run, row: Row) -> None:
        outcome = matrix.reached(row)
        [classified] = outcome.of("recovery_classified")
        verdict = "unknown" if classified["classification"] == "unknown" else "rejected"
        assert (row.verdict, row.stage) == (verdict, classified["stage"]), classified

    def test_graph_received_at_most_one_send_request(self, matrix: Run, row: Row) -> None:
        seen = matrix.reached(row).seen
        assert len(seen.requests) <= 1
        assert seen.sent in row.messages
        assert seen.sent <= len(seen.requests)
        assert 0 == seen.holders_sent


@by_row(UNKNOWN)
def test_recovery_searched_sent_items_and_recorded_only_what_graph_queued(
    matrix: Run, row: Row
) -> None:
    outcome = matrix.reached(row)
    # Searched in one pass only (the next is 15 minutes on, or none is needed). Two recovering
    # processes of one namespace (resumed dispatchers beside the live server) may both search
    # that pass before either records: a search only reads, and the record is fenced (once).
    assert 1 <= outcome.seen.searches <= 2
    found = outcome.of("outcome_evidence")
    if not row.evidence:
        assert [] == found
        return
    [evidence] = found
    assert 1 == outcome.seen.sent
    assert "sent_folder" == evidence["source"] and 1 == evidence["copies"], evidence


@by_row(REJECTED)
def test_a_send_provably_not_made_is_never_searched_for(matrix: Run, row: Row) -> None:
    assert 0 == matrix.reached(row).seen.searches


@by_row(PAUSED)
class TestResumedDispatchers:
    def test_a_resumed_dispatcher_never_sends_what_recovery_closed_before_the_commit_point(
        self, matrix: Run, row: Row
    ) -> None:
        seen = matrix.reached(row).seen
        if row.verdict == "rejected":
            assert [] == seen.requests
            assert 0 == seen.sent

    def test_a_definitive_outcome_learned_after_recovery_is_recorded_as_late(
        self, matrix: Run, row: Row
    ) -> None:
        outcome = matrix.reached(row)
        learned = [e for e in outcome.seen.requests if e.status]
        late = outcome.of("late_outcome_observed")
        if not (row.late_possible and learned):
            assert [] == late
            return
        assert 1 == len(late), late
        assert ("accepted", "graph_submission") == (late[0]["outcome"], late[0]["stage"])
        assert 202 == learned[0].status


@by_row(QUEUED)
class TestDispatchesThatDiedWaitingForASlot(DiedWaiting):
    def test_no_request_of_the_queued_send_reached_graph(self, matrix: Run, row: Row) -> None:
        assert [] == matrix.reached(row).seen.requests


class TestAroundRecovery(AroundRecovery):
    rows = ROWS

    def test_the_next_pass_searched_sent_items_for_each_unknown_send(self, matrix: Run) -> None:
        searched = {
            d["pid"]: d["action"]
            for report in matrix.recovers
            for d in report["decisions"]
            if d["kind"] == "evidence" and d["action"] not in ("too_early", "already_closed")
        }
        expected = {
            o.pid: "evidenced" if o.row.evidence else "no_evidence"
            for o in matrix.killed()
            if o.row.verdict == "unknown"
        }
        assert expected == searched

    def test_every_request_was_on_the_graph_contract(self, matrix: Run) -> None:
        assert 0 == matrix.strays
