"""Issue 25's concurrency and crash evidence: human approval and the send rate limit against the
real Redis, the real SMTP sink and real `angelos serve` processes.

1. A server SIGKILLed right after the `approved` event is durable (before any claim) leaves a
   preparation that a restarted server sends exactly once, without asking again.
2. 100 concurrent confirms of one approved preparation, from two server processes and an
   in-process client, send it once (the approval is recorded once by the gate itself,
   service.approval.gate.approve with an accepting ask, so that no confirm claims it first).
3. 200 concurrent confirms of distinct preparations, 100 through each of two processes, under
   MAIL_SEND_RATE_LIMIT=50/h: exactly 50 sends, 150 refusals that consume nothing.
4. An approved preparation refused by the rate limit stays approved.

The crash of (1) comes from tests/faults/approval_fault_server.py (a test entry point that kills
its process once the store acknowledges an `approved` append); the product is unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from faults.approval_rig import (
    ApprovalFaultServer,
    Asked,
    confirm,
    env_for,
    ledgers,
    prepare,
    rate_members,
    send_status,
    server_pair,
    sink,
    sinks,
    state_of,
    tag,
    types_of,
)
from faults.harness import OWNER, Server, ledger_json, start_servers
from mcp import Client

from ledger.store.ledger_store import LedgerStore
from schemas.args.prepare import SendConfirmed
from service.approval.channel import Answer, Channel
from service.approval.gate import APPROVE, approve
from service.principal import local_principal
from support.inprocess import ALL_SCOPES, mcp_client
from support.services import Services

pytestmark = pytest.mark.services
Pair = tuple[dict[str, str], list[Server]]


@pytest.fixture
async def store(services: Services) -> AsyncIterator[Callable[[str], LedgerStore]]:
    """A LedgerStore on the test Redis for a namespace."""
    async with ledgers(services) as of:
        yield of


# ------------------------------------------------------------------------------------------- 1


class TestCrashBetweenApprovedAndClaimed:
    async def test_a_restarted_server_sends_exactly_once_without_asking_again(
        self, services: Services, store: Callable[[str], LedgerStore], tmp_path: Path
    ) -> None:
        started = time.monotonic()
        namespace, rcpt = f"ar1-{tag()}", f"ar1-{tag()}@example.test"
        env = env_for(services, namespace, ANGELOS_SEND_APPROVAL="elicitation")
        ledger = store(namespace)
        armed = {**env, "TEST_APPROVAL_FAULT": "after_approved"}
        doomed = await asyncio.to_thread(
            lambda: ApprovalFaultServer(armed, tmp_path / "doomed.log")
        )
        try:
            await asyncio.to_thread(doomed.wait_ready)
            async with Client(doomed.url) as client:
                preview = await prepare(client, rcpt)
            pid = preview["prepared_id"]
            asked = Asked()
            answer: Any = None
            try:
                async with Client(doomed.url, elicitation_callback=asked) as client:
                    answer = await asyncio.wait_for(confirm(client, preview), 60)
            except Exception as exc:  # the server died under the call: no answer comes back
                answer = exc
            assert not isinstance(answer, dict), answer
            assert await doomed.wait_state("dead", 10), doomed.log()[-2000:]
            assert -9 == doomed.proc.returncode
            assert "fault_point_reached" in doomed.log()
        finally:
            await asyncio.to_thread(doomed.stop)
        assert 1 == len(asked.messages) and rcpt in asked.messages[0]
        # Durable and unclaimed: the approval is recorded, the payload is still there.
        assert ["prepared", "approval_requested", "approved"] == await types_of(ledger, pid)
        assert "APPROVED" == await state_of(ledger, pid)
        assert await ledger.payload(pid) is not None
        assert [] == sink(services, rcpt)
        _, before = await ledger.read(pid)

        # A recovery pass (the CLI, as the fault matrices run it) and a restarted server.
        recovered, [server] = await asyncio.gather(
            asyncio.to_thread(ledger_json, env, "recover"),
            asyncio.to_thread(start_servers, [env], tmp_path),
        )
        try:
            print(f"recover: {recovered}")
            assert pid not in {d.get("pid") for d in recovered["decisions"]}, recovered
            _, after = await ledger.read(pid)
            assert [e.eid for e in before] == [e.eid for e in after]

            again = Asked()
            async with Client(server.url, elicitation_callback=again) as client:
                shown = await send_status(client, pid)
                assert ("prepared", "elicitation") == (shown["status"], shown["approval"]), shown
                sent = await confirm(client, preview)
                assert ("accepted", False) == (sent["status"], sent["_is_error"]), sent
                assert "resent" not in sent
                assert ["accepted"] == sink(services, rcpt)
                replay = await confirm(client, preview)
                assert {"status": "accepted", "resent": False} == {
                    k: replay.get(k) for k in ("status", "resent")
                }, replay
            assert [] == again.messages  # the restarted server asked no one
            # The whole namespace verifies clean (while the server drains and stops).
            verify, _ = await asyncio.gather(
                asyncio.to_thread(ledger_json, env, "verify"), asyncio.to_thread(server.stop)
            )
        finally:
            await asyncio.to_thread(server.stop)
        assert (True, []) == (verify["ok"], verify["findings"]), verify
        assert ["accepted"] == sink(services, rcpt)
        assert 1 == (await types_of(ledger, pid)).count("claimed")
        print(f"crash between approved and claimed: {time.monotonic() - started:.1f} s")


# ------------------------------------------------------------------------------------------- 2


@pytest.fixture(scope="module")
def approval_pair(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two servers sharing one namespace where every send needs an elicited approval."""
    logs = tmp_path_factory.mktemp("approval-pair")
    with server_pair(services, logs, f"ar2-{tag()}", ANGELOS_SEND_APPROVAL="elicitation") as pair:
        yield pair


class TestManyConfirmsOfOneApproval:
    async def test_100_concurrent_confirms_send_once(
        self, services: Services, store: Callable[[str], LedgerStore], approval_pair: Pair
    ) -> None:
        env, servers = approval_pair
        ledger = store(env["SEND_LEDGER_NAMESPACE"])
        rcpt = f"ar2-{tag()}@example.test"
        async with mcp_client(env, owner=OWNER) as (local, app):
            preview = await prepare(local, rcpt)
            pid = preview["prepared_id"]
            # Approve once, through the gate itself (a person's "send" to the handshake-era
            # question), without the claim that follows it in a confirm.
            asked: list[str] = []

            async def accept(message: str, schema: dict[str, Any]) -> Answer:
                asked.append(message)
                return "accept", dict(APPROVE)

            principal = local_principal(OWNER, ALL_SCOPES)
            args = SendConfirmed(pid, preview["digest"], False)
            assert await approve(app, principal, args, Channel(form=True, ask=accept)) is None
            assert 1 == len(asked)
            assert "APPROVED" == await state_of(ledger, pid)

            async with Client(servers[0].url) as one, Client(servers[1].url) as two:
                clients = [one] * 40 + [two] * 40 + [local] * 20
                answers = await asyncio.gather(*(confirm(c, preview) for c in clients))
                # Once the send is recorded, every later confirm is a replay of `accepted`.
                final = await send_status(local, pid)
                late = await asyncio.gather(*(confirm(c, preview) for c in (one, two, local)))
        kinds = Counter(
            "accepted" if a.get("status") == "accepted" and "resent" not in a
            else f"replay:{a.get('status')}" if a.get("resent") is False
            else f"other:{a.get('error_code')}"
            for a in answers
        )  # fmt: skip
        print(f"100 confirms of one approval: {dict(kinds)}")
        assert 1 == kinds["accepted"], answers
        assert set(kinds) <= {"accepted", "replay:accepted", "replay:sending"}, kinds
        assert "accepted" == final["status"], final
        assert [("accepted", False)] * 3 == [(a.get("status"), a.get("resent")) for a in late]
        assert 1 == len(asked)  # the confirms asked no one: the approval was already recorded
        assert ["accepted"] == sink(services, rcpt)
        stream = Counter(await types_of(ledger, pid))
        print(f"its stream: {dict(stream)}")
        assert (1, 1, 1) == (stream["prepared"], stream["approved"], stream["claimed"]), stream


# ------------------------------------------------------------------------------------------- 3


@pytest.fixture(scope="module")
def limited_pair(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two servers sharing one namespace under MAIL_SEND_RATE_LIMIT=50/h (no approval)."""
    logs = tmp_path_factory.mktemp("limited-pair")
    with server_pair(services, logs, f"ar3-{tag()}", MAIL_SEND_RATE_LIMIT="50/h") as pair:
        yield pair


class TestRateLimitAcrossProcesses:
    async def test_200_confirms_from_two_processes_send_exactly_50(
        self, services: Services, store: Callable[[str], LedgerStore], limited_pair: Pair
    ) -> None:
        started = time.monotonic()
        env, servers = limited_pair
        ledger = store(env["SEND_LEDGER_NAMESPACE"])
        run = tag()
        rcpts = [f"ar3-{run}-{n}@example.test" for n in range(200)]
        async with mcp_client(env, owner=OWNER) as (local, _):
            previews = await asyncio.gather(*(prepare(local, r) for r in rcpts))
            prepared = time.monotonic()
            async with Client(servers[0].url) as one, Client(servers[1].url) as two:
                clients = [one, two] * 100
                answers = await asyncio.gather(
                    *(confirm(c, p) for c, p in zip(clients, previews, strict=True))
                )
            confirmed = time.monotonic()
            statuses = await asyncio.gather(
                *(send_status(local, p["prepared_id"]) for p in previews)
            )
        pids = [p["prepared_id"] for p in previews]
        sent = [n for n, a in enumerate(answers) if a.get("status") == "accepted"]
        limited = [n for n, a in enumerate(answers) if a.get("error_code") == "rate_limited"]
        print(
            f"200 confirms under 50/h: {len(sent)} accepted ({sum(n % 2 == 0 for n in sent)} "
            f"through the first process), {len(limited)} rate_limited "
            f"(prepared in {prepared - started:.1f} s, confirmed in {confirmed - prepared:.1f} s, "
            f"all in {time.monotonic() - started:.1f} s)"
        )
        assert (50, 150) == (len(sent), len(limited)), Counter(
            a.get("status") or a.get("error_code") for a in answers
        )
        for n in limited:
            retry_at = answers[n]["outcome"]["retry_at"]
            assert datetime.fromisoformat(retry_at).timestamp() > time.time() + 3000, retry_at
            assert "not_sent" == answers[n]["outcome"]["status"]
        # The spool: one transaction per sent recipient, none for a refused one.
        spool = sinks(services, rcpts)
        assert all(["accepted"] == spool[rcpts[n]] for n in sent)
        assert all([] == spool[rcpts[n]] for n in limited)
        assert 50 == sum(len(v) for v in spool.values())
        # The refused are not consumed: still prepared, payload kept, no claim.
        for n in limited:
            assert "prepared" == statuses[n]["status"], statuses[n]
        payloads = await asyncio.gather(*(ledger.payload(pids[n]) for n in limited))
        assert all(p is not None for p in payloads)
        streams = await asyncio.gather(*(types_of(ledger, pid) for pid in pids))
        assert [1] * 50 == [streams[n].count("claimed") for n in sent]
        assert [0] * 150 == [streams[n].count("claimed") for n in limited]
        # The window holds exactly the 50 claims.
        members = await rate_members(ledger)
        assert 50 == len(members) == await ledger.client.zcard(ledger.keys.rate)
        assert {pids[n] for n in sent} == set(members)
        # Each process refused some (it had 100 confirms for at most 50 sends).
        assert {0, 1} == {n % 2 for n in limited}


# ------------------------------------------------------------------------------------------- 4


class TestApprovalUnderTheRateLimit:
    async def test_an_approved_preparation_refused_by_the_limit_stays_approved(
        self, services: Services, store: Callable[[str], LedgerStore]
    ) -> None:
        env = env_for(
            services, f"ar4-{tag()}", ANGELOS_SEND_APPROVAL="elicitation",
            MAIL_SEND_RATE_LIMIT="1/m",
        )  # fmt: skip
        ledger = store(env["SEND_LEDGER_NAMESPACE"])
        first, second = f"ar4-{tag()}@example.test", f"ar4-{tag()}@example.test"
        asked = Asked()
        async with mcp_client(env, owner=OWNER, elicitation_callback=asked) as (client, _):
            one, two = await prepare(client, first), await prepare(client, second)
            sent = await confirm(client, one)
            assert ("accepted", 1) == (sent["status"], len(asked.messages)), sent
            _, entries = await ledger.read(one["prepared_id"])
            claimed_ms = next(e.srv_ms for e in entries if e.t == "claimed")

            refused = await confirm(client, two)
            assert "rate_limited" == refused.get("error_code"), refused
            assert 2 == len(asked.messages)  # approved by a person, then refused by the limit
            retry_at = datetime.fromisoformat(refused["outcome"]["retry_at"]).timestamp()
            assert abs(retry_at - (claimed_ms + 60_000) / 1000) <= 1.0, refused["outcome"]
            assert "APPROVED" == await state_of(ledger, two["prepared_id"])
            shown = await send_status(client, two["prepared_id"])
            assert ("prepared", "elicitation") == (shown["status"], shown["approval"]), shown
            assert await ledger.payload(two["prepared_id"]) is not None

            # Confirmed again inside the window: no one is asked again, still refused, still
            # approved.
            again = await confirm(client, two)
            assert "rate_limited" == again.get("error_code"), again
            assert again["outcome"]["retry_at"] == refused["outcome"]["retry_at"]
            assert 2 == len(asked.messages)
            assert "APPROVED" == await state_of(ledger, two["prepared_id"])
        types_two = await types_of(ledger, two["prepared_id"])
        assert 0 == types_two.count("claimed") and 1 == types_two.count("approved"), types_two
        assert (["accepted"], []) == (sink(services, first), sink(services, second))
        assert [one["prepared_id"]] == await rate_members(ledger)
