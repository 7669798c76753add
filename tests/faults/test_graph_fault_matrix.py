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
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.parser
import email.policy
import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest
from faults.harness import (
    FAST,
    GRACE_MS,
    Server,
    confirm,
    ledger_json,
    prepare,
    start_servers,
    status,
)

from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger import decode_event
from schemas.ledger_events import ANNOTATION_TYPES
from support.graph_deploy import GraphRig, graph_rig
from support.graph_double import GRAPH_HOST, Delay, Exchange
from support.services import Services

pytestmark = pytest.mark.services

SEND_ROUTE = "/me/sendMail"
SENT_SEARCH_ROUTE = "/me/mailFolders/sentitems/messages"
# How long the double holds the `/me` checks of the two sends that take the Graph submitter's
# two slots, so that a third send must queue; they are never answered to a killed server.
HOLD_S = 8.0


class Row(NamedTuple):
    """One row of the matrix: where the process dies or pauses, and what must follow."""

    name: str
    point: str  # TEST_FAULT_POINT, a step named by ledger.dispatch.pipeline.CheckpointName
    mode: str  # exit (SIGKILL) or stop (SIGSTOP, later SIGCONT)
    verdict: str  # what recovery classifies: rejected or unknown
    stage: str
    sent: tuple[int, ...]  # messages the double may have queued (sendMail answered 202)
    evidence: bool = False  # Sent Items holds the copy before recovery searches: `accepted`
    late_possible: bool = False  # a resumed dispatcher may learn the outcome after recovery
    queued: bool = False  # the row's send waits behind two others that hold both slots

    @property
    def status(self) -> str:
        """The projected status once recovery (and its search of Sent Items) is done."""
        return "accepted" if self.evidence else self.verdict


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
    Row("kill mid-body (after /me)", "mid_body", "exit", "rejected", "interrupted", (0,)),
    Row(
        "kill after commit point", "after_commit_point", "exit", "unknown", "graph_submission",
        (0,),
    ),
    Row(
        "kill after terminator (202)", "after_terminator", "exit", "unknown", "graph_submission",
        (1,), evidence=True,
    ),
    Row("pause after claimed", "after_claim", "stop", "rejected", "not_attempted", (0,)),
    Row(
        "pause while queued", "while_queued", "stop", "rejected", "not_attempted", (0,),
        queued=True,
    ),
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


class Outcome(NamedTuple):
    """What happened to one row."""

    pid: str
    rcpt: str
    message_id: str
    reached: bool
    status: dict[str, Any]
    types: list[str]
    data: list[dict[str, Any]]  # each entry's event data, in stream order
    requests: list[Exchange]  # the sendMail requests carrying this row's message
    sent: int  # messages the double queued for this row (sendMail answered 202)
    searches: int  # recovery's searches of Sent Items for this row's Message-ID
    replay: Any
    resumed_answer: Any
    recovered_by: str
    holder_pids: tuple[str, ...]  # the sends that held both slots (queued rows), else ()
    holders_sent: int  # sendMail requests of those holders (none may ever be made)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The data of this row's events of one type, in stream order."""
        return [d for t, d in zip(self.types, self.data, strict=True) if t == kind]


class Matrix(NamedTuple):
    """The whole run: per-row outcomes plus the CLI answers around recovery."""

    rows: dict[str, Outcome]
    dry_run: Any
    queue: Any
    recover: Any
    search: Any  # the second `angelos ledger recover`: recovery's search of Sent Items
    verify: dict[str, Any]
    elapsed_s: float
    shown: dict[str, Any]  # `angelos ledger show --json` of every killed row, after recovery
    strays: int  # requests off the Graph contract the double received


# ---------------------------------------------------------------------------------- the double


def _mime(exchange: Exchange) -> bytes:
    try:
        return base64.b64decode(exchange.body, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _addressed_to(mime: bytes, rcpt: str) -> bool:
    head = email.parser.BytesParser(policy=email.policy.default).parsebytes(mime, headersonly=True)
    to = head["To"]
    return to is not None and rcpt in [a.addr_spec for a in to.addresses]


def _send_requests(double: Any, rcpt: str) -> list[Exchange]:
    return [
        e
        for e in double.exchanges
        if e.method == "POST" and e.route == SEND_ROUTE and _addressed_to(_mime(e), rcpt)
    ]


def _queued(double: Any, rcpt: str) -> int:
    return sum(1 for mime in double.sent if _addressed_to(mime, rcpt))


def _searches(double: Any, message_id: str) -> int:
    bare = message_id.strip("<>")
    return sum(
        1
        for e in double.exchanges
        if e.method == "GET"
        and e.route == SENT_SEARCH_ROUTE
        and any(name == "$filter" and bare in value for name, value in e.query)
    )


def _routes(rig: GraphRig, services: Services, path: Path) -> str:
    """The plan fault_server.py hands to tests/support/pinned_launch.py."""
    routes = [
        [GRAPH_HOST, 443, "127.0.0.1", rig.double.port],
        ["login.microsoftonline.com", 443, "127.0.0.1", rig.endpoint.port],
    ]
    path.write_text(json.dumps({"ca_file": str(services.ca_file), "routes": routes}))
    return str(path)


def _graph_env(rig: GraphRig, routes: str) -> dict[str, str]:
    """One microsoft deployment (its own refresh token and namespace) with the FAST timings."""
    return rig.env(
        ANGELOS_LOCAL_SCOPES="mail.read mail.write mail.send",
        TEST_PINNED_ROUTES=routes,
        **FAST,
    )


# ---------------------------------------------------------------------------------- the run


async def _claim_srv_ms(store: LedgerStore, pid: str) -> int:
    _, entries = await store.read(pid)
    return max((e.srv_ms for e in entries if e.t == "claimed"), default=0)


async def _run(services: Services, logs: Path) -> Matrix:
    started = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    async with graph_rig(services) as rig:
        double = rig.double
        routes = _routes(rig, services, logs / "routes.json")
        env_k = _graph_env(rig, routes)
        env_p = _graph_env(rig, routes)
        envs = [
            {
                **(env_k if row.mode == "exit" else env_p),
                "TEST_FAULT_POINT": f"{row.point}:{row.mode}",
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
            rcpts = [f"gm{n}-{tag}@example.test" for n in range(len(ROWS))]
            previews = await asyncio.gather(
                *(prepare(s.url, r) for s, r in zip(faulty, rcpts, strict=True))
            )
            pids = [p["prepared_id"] for p in previews]
            calls: dict[int, asyncio.Task[Any]] = {}
            reached: dict[int, bool] = {}

            # Queued rows first: two sends whose `/me` check the double holds take both slots,
            # the row's send queues behind them and dies or stops there. The held checks count
            # against the mailbox's four concurrent requests, so every other row waits for
            # them to end before it confirms.
            queued = [n for n, row in enumerate(ROWS) if row.queued]
            holders = {n: await _prepare_holders(faulty[n], f"{tag}-{n}") for n in queued}
            double.inject("GET", "/me", Delay(HOLD_S, apply=False), times=2 * len(queued))
            for n in queued:
                holders[n] = [
                    h._replace(task=_confirm_task(faulty[n], h.preview)) for h in holders[n]
                ]
            await _until_held(double, stores, holders)
            for n in queued:
                calls[n] = asyncio.create_task(confirm(faulty[n].url, previews[n]))
            for n in queued:
                reached[n] = await _reach(faulty[n], calls[n], ROWS[n])
            await _until_idle(double)

            rest = [n for n, row in enumerate(ROWS) if not row.queued]
            for n in rest:
                calls[n] = asyncio.create_task(confirm(faulty[n].url, previews[n]))
            for n, done in zip(
                rest,
                await asyncio.gather(*(_reach(faulty[n], calls[n], ROWS[n]) for n in rest)),
                strict=True,
            ):
                reached[n] = done

            # Before the grace: the CLI sees the open claims but recovery may not touch them.
            dry_run = await asyncio.to_thread(ledger_json, env_k, "recover", "--dry-run")
            queue = await asyncio.to_thread(ledger_json, env_k, "list", "--status", "sending")

            claims = [
                await _claim_srv_ms(stores[row.mode], pid)
                for row, pid in zip(ROWS, pids, strict=True)
            ]
            due = max(claims) + GRACE_MS + 500
            await asyncio.sleep(max(0, due - await stores["exit"].server_time_ms()) / 1000)
            recover = await asyncio.to_thread(ledger_json, env_k, "recover")
            # The unknown sends joined the evidence work list as they were classified: the next
            # pass searches Sent Items for each (reading the mailbox, never sending).
            search = await asyncio.to_thread(ledger_json, env_k, "recover")

            # Pause rows: the live server's background task classifies and searches, then the
            # dispatcher wakes up. A dispatcher paused after the commit point makes its one
            # request only now, after that search found nothing: its send stays unknown (the
            # next search is 15 minutes on) and what it learns is recorded as late.
            resumed: dict[int, Any] = {}
            for n, row in enumerate(ROWS):
                if row.mode != "stop" or not reached[n]:
                    continue
                for pid in (pids[n], *(h.pid for h in holders.get(n, ()))):
                    await _until_recovered(survivor_p.url, pid)
                    await _until_searched(stores["stop"], pid)
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
                replay = await confirm(url, previews[n])
                _, entries = await stores[row.mode].read(pids[n])
                rows[row.name] = Outcome(
                    pid=pids[n],
                    rcpt=rcpts[n],
                    message_id=previews[n]["message_id"],
                    reached=reached[n],
                    status=now_status,
                    types=[e.t for e in entries],
                    data=[_data(e.e) for e in entries],
                    requests=[],
                    sent=0,
                    searches=0,
                    replay=replay,
                    resumed_answer=resumed.get(n),
                    recovered_by=next(
                        (_actor(e.e) for e in entries if e.t == "recovery_classified"), ""
                    ),
                    holder_pids=tuple(h.pid for h in holders.get(n, ())),
                    holders_sent=0,
                )
            await asyncio.sleep(0.5)  # no second request may ever appear
            for n, row in enumerate(ROWS):  # what the double saw, after every step above
                o = rows[row.name]
                rows[row.name] = o._replace(
                    requests=_send_requests(double, o.rcpt),
                    sent=_queued(double, o.rcpt),
                    searches=_searches(double, o.message_id),
                    holders_sent=sum(
                        len(_send_requests(double, h.rcpt)) for h in holders.get(n, ())
                    ),
                )
            verify = {
                "exit": await asyncio.to_thread(ledger_json, env_k, "verify"),
                "stop": await asyncio.to_thread(ledger_json, env_p, "verify"),
            }
            killed = [row.name for row in ROWS if row.mode == "exit"]
            shown = dict(
                zip(
                    killed,
                    await asyncio.gather(
                        *(
                            asyncio.to_thread(ledger_json, env_k, "show", rows[name].pid)
                            for name in killed
                        )
                    ),
                    strict=True,
                )
            )
            for task in [*calls.values(), *(h.task for hs in holders.values() for h in hs)]:
                if task is not None:
                    task.cancel()
            elapsed = time.monotonic() - started
            return Matrix(
                rows, dry_run, queue, recover, search, verify, elapsed, shown, len(double.strays)
            )
        finally:
            for server in [*servers, *([survivor_k] if survivor_k else [])]:
                server.stop()
            await client.aclose()


class Holder(NamedTuple):
    """A send that holds one of the Graph submitter's two slots while a queued row waits."""

    rcpt: str
    preview: dict[str, Any]
    task: asyncio.Task[Any] | None = None

    @property
    def pid(self) -> str:
        """Its prepared_id."""
        return str(self.preview["prepared_id"])


async def _prepare_holders(server: Server, tag: str) -> list[Holder]:
    rcpts = [f"hold{k}-{tag}@example.test" for k in range(2)]
    previews = await asyncio.gather(*(prepare(server.url, r) for r in rcpts))
    return [Holder(r, p) for r, p in zip(rcpts, previews, strict=True)]


def _confirm_task(server: Server, preview: dict[str, Any]) -> asyncio.Task[Any]:
    return asyncio.create_task(confirm(server.url, preview))


async def _until_held(
    double: Any, stores: dict[str, LedgerStore], holders: dict[int, list[Holder]]
) -> None:
    """Wait until every holder's attempt marker is in the ledger and every held `/me` check
    reached the double: a slot is held from before the marker until its check is answered, so
    a send confirmed next on the same server must queue."""
    everyone = [(stores[ROWS[n].mode], h) for n, hs in holders.items() for h in hs]
    for _ in range(600):
        markers = 0
        for store, holder in everyone:
            _, entries = await store.read(holder.pid)
            markers += "smtp_attempt_started" in [e.t for e in entries]
        if markers == len(everyone) and double.in_flight == len(everyone):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the sends holding both slots never reached their /me check")


async def _until_idle(double: Any) -> None:
    """Wait until the double answers nothing (the held `/me` checks are over)."""
    for _ in range(round((HOLD_S + 30) / 0.05)):
        if not double.in_flight:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the held /me checks never ended")


def _actor(e: str) -> str:
    return e.split('"actor":"', 1)[1].split(":", 1)[0] if '"actor":"' in e else ""


def _data(e: str) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(decode_event(e).data)
    return data


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
        if answer.get("recovered"):
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"recovery did not close {pid}")


async def _until_searched(store: LedgerStore, pid: str) -> None:
    """Wait until recovery searched Sent Items for a send it made unknown (others: at once).

    A send joins the evidence work list (scored now) in the same append that makes it unknown;
    a search moves it to its next scheduled search (15 minutes on) or, with a copy found,
    records the evidence and leaves the list.
    """
    for _ in range(100):
        score = await store.client.zscore(store.keys.evidence, pid)
        if score is None or score > await store.server_time_ms() + 60_000:
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"recovery did not search Sent Items for {pid}")


@pytest.fixture(scope="module")
def matrix(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    if not services.graph_user:
        pytest.skip("this scripts/test-services run has no Graph user (MAILTEST_GRAPH_USER)")
    logs = tmp_path_factory.mktemp("graph-fault-matrix")
    (logs / "k").mkdir()
    with ThreadPoolExecutor(1) as pool:  # its own event loop (and the doubles'), outside any test's
        result = pool.submit(asyncio.run, _run(services, logs)).result()
    print(_table(result))
    yield result


def _shown(o: Outcome) -> str:
    shown = o.status.get("status", "?") + (f" / {o.status['stage']}" if "stage" in o.status else "")
    if o.status.get("evidence"):
        shown += f" (evidence {o.status['evidence']})"
    if "late_outcome_observed" in o.types:
        shown += ", late_outcome_observed"
    return shown


def _table(result: Matrix) -> str:
    lines = [
        f"Graph fault matrix in {result.elapsed_s:.0f} s",
        "| step killed or paused | status after recovery | sendMail requests (queued) |",
        "| --- | --- | --- |",
    ]
    for row in ROWS:
        o = result.rows[row.name]
        reached = "" if o.reached else " (fault point not reached)"
        lines.append(f"| {row.name}{reached} | {_shown(o)} | {len(o.requests)} ({o.sent}) |")
    return "\n".join(lines)


def _row(matrix: Matrix, row: Row) -> Outcome:
    outcome = matrix.rows[row.name]
    if not outcome.reached:
        pytest.fail(f"the server never reached {row.point}")
    return outcome


KILLED = [row for row in ROWS if row.mode == "exit"]
UNKNOWN = [row for row in ROWS if row.verdict == "unknown"]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
class TestEveryLedgerStep:
    def test_the_projected_status_is_the_conservative_one(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        expected = {"status": row.status, "stage": row.stage, "recovered": True}
        assert expected == {k: outcome.status.get(k) for k in expected}, outcome.types
        assert ("sent_copy" if row.evidence else None) == outcome.status.get("evidence")
        assert "recovery" == outcome.recovered_by

    def test_recovery_classified_from_the_last_durable_step(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        [classified] = outcome.of("recovery_classified")
        verdict = "unknown" if classified["classification"] == "unknown" else "rejected"
        assert (row.verdict, row.stage) == (verdict, classified["stage"]), classified

    def test_graph_received_at_most_one_send_request(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        assert len(outcome.requests) <= 1
        assert outcome.sent in row.sent
        assert outcome.sent <= len(outcome.requests)
        assert 0 == outcome.holders_sent

    def test_a_reconfirm_replays_and_nothing_is_resent(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        assert False is outcome.replay.get("resent"), outcome.replay
        assert outcome.status["status"] == outcome.replay["status"]

    def test_the_lifecycle_ends_where_recovery_put_it(self, matrix: Matrix, row: Row) -> None:
        outcome = _row(matrix, row)
        lifecycle = [t for t in outcome.types if t not in ANNOTATION_TYPES]
        closing = ["recovery_classified", *(["outcome_evidence"] if row.evidence else [])]
        assert closing == lifecycle[-len(closing) :], lifecycle
        assert 1 == outcome.types.count("recovery_classified")
        assert (1 if row.evidence else 0) == outcome.types.count("outcome_evidence")


@pytest.mark.parametrize("row", UNKNOWN, ids=[r.name for r in UNKNOWN])
def test_recovery_searched_sent_items_and_recorded_only_what_graph_queued(
    matrix: Matrix, row: Row
) -> None:
    outcome = _row(matrix, row)
    assert 1 == outcome.searches  # once: the next search is 15 minutes on, or none is needed
    found = outcome.of("outcome_evidence")
    if not row.evidence:
        assert [] == found
        return
    [evidence] = found
    assert 1 == outcome.sent
    assert "sent_folder" == evidence["source"] and 1 == evidence["copies"], evidence


REJECTED = [r for r in ROWS if r.verdict == "rejected"]


@pytest.mark.parametrize("row", REJECTED, ids=[r.name for r in REJECTED])
def test_a_send_provably_not_made_is_never_searched_for(matrix: Matrix, row: Row) -> None:
    assert 0 == _row(matrix, row).searches


PAUSED = [r for r in ROWS if r.mode == "stop"]


@pytest.mark.parametrize("row", PAUSED, ids=[r.name for r in PAUSED])
class TestResumedDispatchers:
    def test_a_resumed_dispatcher_never_sends_what_recovery_closed_before_the_commit_point(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        if row.verdict == "rejected":
            assert [] == outcome.requests
            assert 0 == outcome.sent

    def test_a_definitive_outcome_learned_after_recovery_is_recorded_as_late(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        learned = [e for e in outcome.requests if e.status]
        late = outcome.of("late_outcome_observed")
        if not (row.late_possible and learned):
            assert [] == late
            return
        assert 1 == len(late), late
        assert ("accepted", "graph_submission") == (late[0]["outcome"], late[0]["stage"])
        assert 202 == learned[0].status


QUEUED = [r for r in ROWS if r.queued]


@pytest.mark.parametrize("row", QUEUED, ids=[r.name for r in QUEUED])
class TestDispatchesThatDiedWaitingForASlot:
    def test_the_ledger_shows_the_wait_and_no_attempt_marker(
        self, matrix: Matrix, row: Row
    ) -> None:
        outcome = _row(matrix, row)
        assert "dispatch_queued" in outcome.types
        assert "smtp_attempt_started" not in outcome.types

    def test_no_request_of_the_queued_send_reached_graph(self, matrix: Matrix, row: Row) -> None:
        assert [] == _row(matrix, row).requests


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
        abandoned = {o.pid for r, o in _killed(matrix)}
        assert abandoned <= listed

    def test_the_cli_recovery_closed_every_killed_dispatch(self, matrix: Matrix) -> None:
        decided = {d["pid"] for d in matrix.recover["decisions"] if d["action"] == "classified"}
        killed = {pid for _, o in _killed(matrix) for pid in (o.pid, *o.holder_pids)}
        assert killed == decided

    def test_the_next_pass_searched_sent_items_for_each_unknown_send(self, matrix: Matrix) -> None:
        searched = {
            d["pid"]: d["action"]
            for report in (matrix.recover, matrix.search)
            for d in report["decisions"]
            if d["kind"] == "evidence" and d["action"] not in ("too_early", "already_closed")
        }
        expected = {
            o.pid: "evidenced" if r.evidence else "no_evidence"
            for r, o in _killed(matrix)
            if r.verdict == "unknown"
        }
        assert expected == searched

    @pytest.mark.parametrize("mode", ["exit", "stop"])
    def test_verify_passes_on_every_stream_the_matrix_produced(
        self, matrix: Matrix, mode: str
    ) -> None:
        report = matrix.verify[mode]
        assert (True, []) == (report["ok"], report["findings"])

    def test_every_request_was_on_the_graph_contract(self, matrix: Matrix) -> None:
        assert 0 == matrix.strays

    def test_the_whole_matrix_fits_in_a_few_minutes(self, matrix: Matrix) -> None:
        assert matrix.elapsed_s < 240


def _killed(matrix: Matrix) -> list[tuple[Row, Outcome]]:
    return [
        (row, matrix.rows[row.name])
        for row in ROWS
        if row.mode == "exit" and matrix.rows[row.name].reached
    ]
