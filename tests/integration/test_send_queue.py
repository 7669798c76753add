"""Confirms beyond the SMTP connection pool wait their turn: never aborted, never rejected, and
`send_status` says they are queued (one real server process, SMTP_MAX_CONNECTIONS=1)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from faults.harness import (
    Server,
    confirm,
    ledger_cli,
    prepare,
    server_env,
    start_servers,
    status,
)

from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from support.services import Services
from support.smtp_sink import wait_for_transactions

pytestmark = pytest.mark.services
NAMESPACE = f"sq-{uuid.uuid4().hex[:8]}"
# One connection; a tool deadline of 1 s so a waiting confirm answers before its send is done;
# room enough (30 s to the commit point) that the holder's slow reply never aborts anything.
ENV_EXTRA = {
    "SMTP_MAX_CONNECTIONS": "1",
    "SEND_TOOL_DEADLINE_S": "1",
    "SMTP_DATA_TERMINATION_TIMEOUT_S": "20",
    "SEND_DISPATCH_DEADLINE_S": "50",
    "SEND_RECOVERY_GRACE_S": "120",
}


@pytest.fixture(scope="module")
def env(services: Services) -> dict[str, str]:
    return server_env(services, NAMESPACE, **ENV_EXTRA)


@pytest.fixture(scope="module")
def server(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    [started] = start_servers([env], tmp_path_factory.mktemp("send-queue"))
    yield started
    started.stop()


async def ledger_types(services: Services, pid: str) -> list[str]:
    store = LedgerStore(connect(services.redis_url), LedgerSettings(namespace=NAMESPACE))
    try:
        _, entries = await store.read(pid)
    finally:
        await store.client.aclose()
    return [e.t for e in entries]


async def until_final(url: str, pid: str) -> dict[str, Any]:
    for _ in range(300):
        answer = await status(url, pid)
        if answer["status"] != "sending":
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"{pid} never left sending")


@pytest.fixture(scope="module")
def run(services: Services, server: Server) -> dict[str, Any]:
    """A slow send holds the only connection while a second one is confirmed."""

    async def scenario() -> dict[str, Any]:
        dom = f"q{uuid.uuid4().hex[:10]}.example.test"
        holder = await prepare(server.url, f"slow-6@{dom}")
        queued = await prepare(server.url, f"ok@{dom}")
        holding = asyncio.create_task(confirm(server.url, holder))
        await wait_for_transactions(lambda t: t.rcpt_tos == [f"slow-6@{dom}"], within=20)
        answer = await confirm(server.url, queued)
        while_waiting = await status(server.url, queued["prepared_id"])
        final = await until_final(server.url, queued["prepared_id"])
        await holding
        lines = await wait_for_transactions(
            lambda t: t.rcpt_tos[0].endswith("@" + dom), count=2, within=20
        )
        return {
            "answer": answer,
            "while_waiting": while_waiting,
            "final": final,
            "types": await ledger_types(services, queued["prepared_id"]),
            "lines": sorted(lines, key=lambda t: t.n),
            "pid": queued["prepared_id"],
            "replay": await confirm(server.url, queued),
        }

    return asyncio.run(scenario())


class TestAQueuedSend:
    def test_the_confirm_answers_sending_and_queued_past_the_tool_deadline(
        self, run: dict[str, Any]
    ) -> None:
        assert ("sending", True) == (run["answer"]["status"], run["answer"].get("queued"))

    def test_send_status_says_it_is_queued_while_it_waits(self, run: dict[str, Any]) -> None:
        assert ("sending", True) == (run["while_waiting"]["status"], run["while_waiting"]["queued"])

    def test_the_waiting_send_completes_accepted_and_is_no_longer_queued(
        self, run: dict[str, Any]
    ) -> None:
        assert "accepted" == run["final"]["status"]
        assert "queued" not in run["final"]

    def test_the_ledger_records_the_wait_between_the_claim_and_the_attempt_marker(
        self, run: dict[str, Any]
    ) -> None:
        lifecycle = [t for t in run["types"] if t != "duplicate_confirm"]
        assert [
            "prepared", "claimed", "dispatch_queued", "smtp_attempt_started",
            "smtp_commit_point", "smtp_accepted",
        ] == lifecycle  # fmt: skip

    def test_the_waiting_send_reused_the_holders_connection(self, run: dict[str, Any]) -> None:
        holder, queued = run["lines"]
        assert ("slow", "accepted") == (holder.outcome, queued.outcome)
        assert holder.connection == queued.connection

    def test_a_reconfirm_replays_and_resends_nothing(self, run: dict[str, Any]) -> None:
        assert (False, "accepted") == (run["replay"]["resent"], run["replay"]["status"])

    def test_the_timeline_tells_the_wait(self, run: dict[str, Any], env: dict[str, str]) -> None:
        shown = ledger_cli(env, "show", run["pid"])
        assert 0 == shown.returncode, shown.stderr
        assert "waiting for one of 1 SMTP connections (0 ahead)" in shown.stdout
