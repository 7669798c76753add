"""Issue 25's concurrency and crash evidence: human approval and the send rate limit against the
real Redis, the real SMTP sink and real `angelos serve` processes.

1. A server SIGKILLed right after the `approved` event is durable (before any claim) leaves a
   preparation that a restarted server sends exactly once, without asking again.
2. 100 concurrent confirms of one approved preparation, from two server processes and an
   in-process client, send it once.
3. 200 concurrent confirms of distinct preparations, 100 through each of two processes, under
   MAIL_SEND_RATE_LIMIT=50/h: exactly 50 sends, 150 refusals that consume nothing.
4. An approved preparation refused by the rate limit stays approved.

The crash of (1) comes from tests/faults/approval_fault_server.py (a test entry point that kills
its process once the store acknowledges an `approved` append); the product is unchanged.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from faults.harness import OWNER, Server, ledger_json, start_servers
from mcp import Client

from ledger.chain import verified_events
from ledger.lifecycle import fold
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.args.prepare import SendConfirmed
from service.approval.channel import Answer, Channel
from service.approval.gate import APPROVE, approve
from service.principal import local_principal
from support.angelos_process import ROOT, clean_env, free_port
from support.inprocess import ALL_SCOPES, mcp_client
from support.services import Services
from support.smtp_sink import transactions

pytestmark = pytest.mark.services
APPROVAL_FAULT_SERVER = Path(__file__).with_name("approval_fault_server.py")


def env_for(services: Services, namespace: str, **extra: str) -> dict[str, str]:
    """A server's (and the ledger CLI's) environment: production timings, not the fault
    matrices' 1 s leases, so a busy machine cannot lapse a lease mid-test."""
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "ANGELOS_LOCAL_SCOPES": "mail.read mail.write mail.send",
        "SEND_LEDGER_NAMESPACE": namespace,
        **extra,
    }


def tag() -> str:
    return uuid.uuid4().hex[:10]


class ApprovalFaultServer(Server):
    """`angelos serve --transport http` through approval_fault_server.py (armed by the env)."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(APPROVAL_FAULT_SERVER), "serve", "--transport", "http",
             "--host", "127.0.0.1", "--port", str(self.port), "--insecure-local-owner", OWNER],
            env=clean_env(env), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self._log,
        )  # fmt: skip


class Asked:
    """An elicitation callback that accepts ("send") and counts what it was asked."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.messages.append(params.message)
        return types.ElicitResult(action="accept", content=dict(APPROVE))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    body: dict[str, Any] = dict(result.structured_content or {})
    body["_is_error"] = bool(result.is_error)
    return body


async def prepare(client: Client, rcpt: str) -> dict[str, Any]:
    message = {"to": [rcpt], "subject": "Approval race", "text": "Hello"}
    body = await call(client, "mail_prepare", {"action": "new", "message": message})
    assert body.get("status") == "prepared", body
    return body


async def confirm(client: Client, preview: dict[str, Any]) -> dict[str, Any]:
    return await call(client, "mail_send_confirmed", {
        "prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
        "append_sent": False,
    })  # fmt: skip


async def send_status(client: Client, pid: str) -> dict[str, Any]:
    return await call(client, "mail_query", {"action": "send_status", "prepared_id": pid})


def sink(services: Services, rcpt: str) -> list[str]:
    """The outcomes of the SMTP sink's DATA transactions naming `rcpt`."""
    return [t.outcome for t in transactions(services.smtp_spool, rcpt=rcpt)]


@pytest.fixture
async def store(services: Services) -> AsyncIterator[Any]:
    """A factory of LedgerStores on the test Redis, one per namespace; closed after."""
    client = connect(services.redis_url)

    def of(namespace: str) -> LedgerStore:
        return LedgerStore(client, LedgerSettings(namespace=namespace))

    yield of
    await client.aclose()


async def types_of(store: LedgerStore, pid: str) -> list[str]:
    _, entries = await store.read(pid)
    return [e.t for e in entries]


async def state_of(store: LedgerStore, pid: str) -> str:
    _, entries = await store.read(pid)
    return fold(verified_events(pid, entries), [e.srv_ms for e in entries]).state


# ------------------------------------------------------------------------------------------- 1


class TestCrashBetweenApprovedAndClaimed:
    async def test_a_restarted_server_sends_exactly_once_without_asking_again(
        self, services: Services, store: Any, tmp_path: Path
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
        finally:
            await asyncio.to_thread(server.stop)
        assert ["accepted"] == sink(services, rcpt)
        assert 1 == (await types_of(ledger, pid)).count("claimed")
        verify = await asyncio.to_thread(ledger_json, env, "verify")
        assert (True, []) == (verify["ok"], verify["findings"]), verify
        print(f"crash between approved and claimed: {time.monotonic() - started:.1f} s")


# ------------------------------------------------------------------------------------------- 2


@pytest.fixture(scope="module")
def approval_pair(
    services: Services, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], list[Server]]]:
    """Two servers sharing one namespace where every send needs an elicited approval."""
    env = env_for(services, f"ar2-{tag()}", ANGELOS_SEND_APPROVAL="elicitation")
    servers = start_servers([env, env], tmp_path_factory.mktemp("approval-pair"))
    try:
        yield env, servers
    finally:
        for server in servers:
            server.stop()


class TestManyConfirmsOfOneApproval:
    async def test_100_concurrent_confirms_send_once(
        self, services: Services, store: Any, approval_pair: tuple[dict[str, str], list[Server]]
    ) -> None:
        started = time.monotonic()
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
        kinds = Counter(
            "accepted" if a.get("status") == "accepted" and "resent" not in a
            else f"replay:{a.get('status')}" if a.get("resent") is False
            else f"other:{a.get('error_code')}"
            for a in answers
        )  # fmt: skip
        print(f"100 confirms of one approval: {dict(kinds)}")
        assert 1 == kinds["accepted"], answers
        assert set(kinds) <= {"accepted", "replay:accepted", "replay:sending"}, kinds
        assert ["accepted"] == sink(services, rcpt)
        assert 1 == (await types_of(ledger, pid)).count("claimed")
        assert 1 == (await types_of(ledger, pid)).count("approved")
        assert time.monotonic() - started < 30


# ------------------------------------------------------------------------------------------- 3


@pytest.fixture(scope="module")
def limited_pair(
    services: Services, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], list[Server]]]:
    """Two servers sharing one namespace under MAIL_SEND_RATE_LIMIT=50/h (no approval)."""
    env = env_for(services, f"ar3-{tag()}", MAIL_SEND_RATE_LIMIT="50/h")
    servers = start_servers([env, env], tmp_path_factory.mktemp("limited-pair"))
    try:
        yield env, servers
    finally:
        for server in servers:
            server.stop()


class TestRateLimitAcrossProcesses:
    async def test_200_confirms_from_two_processes_send_exactly_50(
        self, services: Services, store: Any, limited_pair: tuple[dict[str, str], list[Server]]
    ) -> None:
        started = time.monotonic()
        env, servers = limited_pair
        ledger = store(env["SEND_LEDGER_NAMESPACE"])
        run = tag()
        rcpts = [f"ar3-{run}-{n}@example.test" for n in range(200)]
        async with mcp_client(env, owner=OWNER) as (local, _):
            previews = await asyncio.gather(*(prepare(local, r) for r in rcpts))
            prepared_s = time.monotonic() - started
            async with Client(servers[0].url) as one, Client(servers[1].url) as two:
                clients = [one, two] * 100
                answers = await asyncio.gather(
                    *(confirm(c, p) for c, p in zip(clients, previews, strict=True))
                )
            statuses = await asyncio.gather(
                *(send_status(local, p["prepared_id"]) for p in previews)
            )
        pids = [p["prepared_id"] for p in previews]
        sent = [n for n, a in enumerate(answers) if a.get("status") == "accepted"]
        limited = [n for n, a in enumerate(answers) if a.get("error_code") == "rate_limited"]
        print(
            f"200 confirms under 50/h: {len(sent)} accepted, {len(limited)} rate_limited "
            f"(prepared in {prepared_s:.1f} s, all in {time.monotonic() - started:.1f} s)"
        )
        assert (50, 150) == (len(sent), len(limited)), Counter(
            a.get("status") or a.get("error_code") for a in answers
        )
        for n in limited:
            retry_at = answers[n]["outcome"]["retry_at"]
            assert datetime.fromisoformat(retry_at).timestamp() > time.time() + 3000, retry_at
            assert "not_sent" == answers[n]["outcome"]["status"]
        # The spool: one transaction per sent recipient, none for a refused one.
        spool = {r: sink(services, r) for r in rcpts}
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
        members = await ledger.client.zrange(ledger.keys.rate, 0, -1)
        assert {pids[n] for n in sent} == {m.decode() for m in members}
        assert 50 == await ledger.client.zcard(ledger.keys.rate)
        # Both processes took part in the sends and in the refusals.
        assert {n % 2 for n in sent} == {0, 1} and {n % 2 for n in limited} == {0, 1}


# ------------------------------------------------------------------------------------------- 4


class TestApprovalUnderTheRateLimit:
    async def test_an_approved_preparation_refused_by_the_limit_stays_approved(
        self, services: Services, store: Any
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
        assert [one["prepared_id"].encode()] == await ledger.client.zrange(ledger.keys.rate, 0, -1)
