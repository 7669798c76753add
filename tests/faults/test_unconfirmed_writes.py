"""A write no replica confirmed is never acted on: with SEND_LEDGER_WAIT_REPLICAS=1 against a
Redis that has no replica, `WAIT` on the writing connection answers 0, so a claim stops before
its attempt marker and nothing reaches the SMTP server; with the setting at 0 the same store
sends.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from faults.harness import confirm, prepare, server_env, start_servers, status

from ledger.ids import new_id
from ledger.store.connection import connect
from ledger.store.durability.acks import Acknowledgment
from support.ledger import ATTEMPT
from support.ledger_redis import claimed_send, make_store
from support.services import Services
from support.smtp_sink import transactions

pytestmark = pytest.mark.services


async def test_the_store_reports_each_write_unconfirmed_while_no_replica_holds_it(
    services: Services,
) -> None:
    client = connect(services.redis_url)
    store = make_store(client, f"uw-{new_id()[:12]}")
    try:
        pid, head = await claimed_send(store)  # no acknowledgment required: confirmed
        store.require(Acknowledgment(replicas=1, timeout_ms=100))
        outcome = await store.append(pid, head, ATTEMPT, actor="dispatcher:x", eid=new_id())
        assert ("appended", False) == (outcome.result, outcome.confirmed)
        store.require(Acknowledgment(replicas=0))
        assert outcome.head is not None
        _, entries = await store.read(pid)
        assert "smtp_attempt_started" == entries[-1].t  # written, only not confirmed
    finally:
        await client.aclose()


async def test_a_confirm_whose_claim_no_replica_holds_sends_nothing(
    services: Services, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    env = server_env(
        services, f"uw-{tag}", SEND_LEDGER_WAIT_REPLICAS="1", SEND_LEDGER_FSYNC_TIMEOUT_MS="100"
    )
    (server,) = await asyncio.to_thread(start_servers, [env], tmp_path)
    try:
        rcpt = f"uw-{tag}@example.test"
        preview = await prepare(server.url, rcpt)
        answer = await confirm(server.url, preview)
        assert "rejected" == answer["status"], answer
        found = await status(server.url, preview["prepared_id"])
        assert ("rejected", "not_attempted") == (found["status"], found["stage"]), found
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)
    finally:
        await asyncio.to_thread(server.stop)
