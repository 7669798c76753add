"""Redis crashes mid-run: with AOF and appendfsync
always, no acknowledged ledger event is lost, a claim survives, and nothing is ever resent."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

import pytest
from faults.harness import (
    PrivateRedis,
    confirm,
    prepare,
    private_redis,
    server_env,
    start_servers,
    status,
)

from ledger.audit.checks import AuditRules
from ledger.audit.verify import verify_ledger
from ledger.ids import new_id
from ledger.store.bulk import BulkReader
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.errors import MailError
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, DIGEST, OWNER, claimed, payload
from support.ledger_redis import now_ms
from support.services import Services
from support.smtp_sink import transactions

pytestmark = pytest.mark.services
Acked = tuple[str, int, str]  # (pid, seq, h) of an event whose write returned success


async def lifecycles(store: LedgerStore, acked: list[Acked], stop: asyncio.Event) -> None:
    """Run complete sends one after another, recording every acknowledged event."""
    while not stop.is_set():
        pid = new_id()
        try:
            prepared = await store.prepare(
                payload(pid, created_ms=now_ms()), actor="api:w", eid=new_id()
            )
            if prepared.result != "ok" or prepared.head is None:
                continue
            acked.append((pid, 1, prepared.head.h))
            claim = await store.claim(
                pid, owner=OWNER, confirmed_digest=DIGEST, head=prepared.head,
                claimed=claimed(), actor=f"dispatcher:{'c3' * 16}", eid=new_id(),
            )  # fmt: skip
            if claim.result != "claimed" or claim.head is None:
                continue
            head = claim.head
            acked.append((pid, head.seq, head.h))
            for data in (ATTEMPT, COMMIT, ACCEPTED):
                outcome = await store.append(
                    pid, head, data, actor=f"dispatcher:{'c3' * 16}", eid=new_id()
                )
                if outcome.result != "appended" or outcome.head is None:
                    break
                head = outcome.head
                acked.append((pid, head.seq, head.h))
        except MailError:
            await asyncio.sleep(0.05)  # the store is down: this send stops here, never retried


class TestAcknowledgedEventsSurviveACrash:
    async def test_no_acknowledged_event_is_lost_when_redis_is_killed_mid_run(
        self, tmp_path: Path
    ) -> None:
        with private_redis(tmp_path) as redis:
            client = connect(redis.url, socket_timeout=2)
            store = LedgerStore(client, LedgerSettings(namespace="crash", recovery_grace_ms=0))
            acked: list[Acked] = []
            stop = asyncio.Event()
            writers = [asyncio.create_task(lifecycles(store, acked, stop)) for _ in range(8)]
            await asyncio.sleep(1.5)
            before_kill = len(acked)
            await asyncio.to_thread(redis.kill)  # SIGKILL: only the AOF survives
            await asyncio.sleep(0.3)
            await asyncio.to_thread(redis.start)
            await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*writers)
            reader = BulkReader(client, store.keys)
            pids = sorted({pid for pid, _, _ in acked})
            found: dict[tuple[str, int], str] = {}
            for start in range(0, len(pids), 256):
                _, groups = await reader.entries(pids[start : start + 256])
                for entries in groups:
                    found.update({(e.pid, e.seq): e.h for e in entries})
            rules = AuditRules(grace_ms=0, as_of_ms=await store.server_time_ms())
            verdict = await verify_ledger(reader, rules)
            await client.aclose()
        lost = [(pid, seq) for pid, seq, h in acked if found.get((pid, seq)) != h]
        assert before_kill > 100 and len(acked) > before_kill
        assert [] == lost
        assert [] == verdict.findings


class TestClaimSurvivesACrash:
    async def test_a_claim_outlives_a_redis_crash_and_a_reconfirm_never_sends(
        self, services: Services, tmp_path: Path
    ) -> None:
        data = tmp_path / "redis"
        data.mkdir()
        redis = PrivateRedis(data)
        redis.start()
        rcpt = f"crash-{uuid.uuid4().hex[:8]}@example.test"
        env = server_env(services, "crash", ANGELOS_REDIS_URL=redis.url)
        try:
            faulty = start_servers(
                [{**env, "TEST_FAULT_POINT": "after_attempt_started:exit"}], tmp_path
            )[0]
            preview = await prepare(faulty.url, rcpt)
            with contextlib.suppress(Exception):
                await confirm(faulty.url, preview)
            assert await faulty.wait_state("dead", 10)
            faulty.stop()
            redis.kill()
            redis.start()
            (tmp_path / "after").mkdir()
            (healthy,) = start_servers([env], tmp_path / "after")
            try:
                answer = await status(healthy.url, preview["prepared_id"])
                again = await confirm(healthy.url, preview)
                client = connect(redis.url)
                store = LedgerStore(client, LedgerSettings(namespace="crash"))
                _, entries = await store.read(preview["prepared_id"])
                payload_left = await client.exists(store.keys.payload(preview["prepared_id"]))
                await client.aclose()
            finally:
                healthy.stop()
        finally:
            redis.stop()
        assert "sending" == answer["status"]
        assert ["prepared", "claimed", "smtp_attempt_started"] == [e.t for e in entries][:3]
        assert 0 == payload_left
        assert (False, "sending") == (again["resent"], again["status"])
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)

    async def test_a_store_down_at_confirm_time_sends_nothing_and_the_id_still_sends_once(
        self, services: Services, tmp_path: Path
    ) -> None:
        data = tmp_path / "redis"
        data.mkdir()
        rcpt = f"down-{uuid.uuid4().hex[:8]}@example.test"
        with private_redis(data) as redis:
            env = server_env(services, "down", ANGELOS_REDIS_URL=redis.url)
            (server,) = start_servers([env], tmp_path)
            try:
                preview = await prepare(server.url, rcpt)
                redis.kill()
                refused = await confirm(server.url, preview)
                nothing = transactions(services.smtp_spool, rcpt=rcpt)
                redis.start()
                before = await status(server.url, preview["prepared_id"])
                sent = await confirm(server.url, preview)
            finally:
                server.stop()
        assert "error_code" in refused and [] == nothing
        assert "nothing was claimed or sent" in refused["error"]
        assert "prepared" == before["status"]
        assert "accepted" == sent["status"]
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))
