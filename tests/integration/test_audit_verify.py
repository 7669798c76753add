"""`verify` against a real Redis (and the embedded one): a sound ledger verifies every event and
index entry; each kind of stored damage is a finding naming the send, never a crash."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from ledger.audit.checks import AuditRules
from ledger.audit.verify import verify_ledger
from ledger.store.bulk import BulkReader
from ledger.store.ledger_store import LedgerStore
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, UNKNOWN
from support.ledger_redis import (
    advance,
    backend_fixture,
    claimed_send,
    client_fixture,
    embedded_socket_fixture,
    namespace_fixture,
    prepared_send,
    store_fixture,
)

__all__ = [
    "backend_fixture",
    "client_fixture",
    "embedded_socket_fixture",
    "namespace_fixture",
    "store_fixture",
]


async def rebuild(
    client: aioredis.Redis, key: str, seq: int, change: dict[bytes, bytes | None]
) -> None:
    """Rewrite one stored entry's fields: None drops one, a changed or new one goes last."""
    items = await client.xrange(key)
    await client.delete(key)
    for entry_id, fields in items:
        if entry_id == f"0-{seq}".encode():
            kept = {name: value for name, value in fields.items() if name not in change}
            fields = kept | {name: value for name, value in change.items() if value is not None}
        await client.xadd(key, fields, id=entry_id)


async def varied_ledger(store: LedgerStore, client: aioredis.Redis) -> None:
    """Sound sends in several states, and one of each kind of damage the scan must hand over."""
    pids = []
    for outcome in (ACCEPTED, UNKNOWN, ACCEPTED, ACCEPTED, ACCEPTED, ACCEPTED, ACCEPTED):
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, outcome)
        pids.append(pid)
    sending, head = await claimed_send(store)
    await advance(store, sending, head, ATTEMPT)
    await prepared_send(store)
    stream = store.keys.stream
    entry = await client.xrange(stream(pids[2]), "0-3", "0-3")
    e = entry[0][1][b"e"]
    await rebuild(client, stream(pids[2]), 3, {b"e": e.replace(b"tls", b"tlx", 1)})
    await rebuild(client, stream(pids[3]), 2, {b"e": None, b"e2": b"x"})  # lacks e, has extra
    moved = await client.xrange(stream(pids[4]), "0-4", "0-4")
    await rebuild(client, stream(pids[4]), 4, {b"h": moved[0][1][b"h"]})  # h after srv_ms
    await rebuild(client, stream(pids[5]), 1, {b"t": b"pr\xe9pared"})  # not ASCII
    await client.delete(stream(pids[6]))  # deleted: only its index entries remain
    await client.xadd(store.keys.index, {"pid": "not-a-pid", "seq": 1, "t": "x", "h": "y"})
    await client.xadd(store.keys.index, {"seq": 1, "pid": sending, "t": "claimed", "h": "0" * 64})


class TestVerify:
    async def test_every_kind_of_stored_damage_is_a_finding_on_its_send(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        await varied_ledger(store, client)
        reader = BulkReader(client, store.keys)
        rules = AuditRules(grace_ms=60_000, as_of_ms=time.time_ns() // 1_000_000 + 1)
        found = await verify_ledger(reader, rules)
        kinds = {finding.kind for finding in found.findings}
        assert {"hash_mismatch", "missing_field", "missing_stream", "index_malformed"} <= kinds
        assert {"index_mismatch"} <= kinds  # the non-ASCII type differs from its index entry
        assert False is found.ok
        assert {"corrupt", "accepted", "unknown", "sending", "prepared"} >= set(found.statuses)

    async def test_a_sound_ledger_verifies_every_event_and_index_entry(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        for _ in range(6):
            pid, head = await claimed_send(store)
            await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        progress: list[tuple[int, int]] = []
        reader = BulkReader(client, store.keys)
        rules = AuditRules(grace_ms=60_000, as_of_ms=time.time_ns() // 1_000_000 + 1)
        found = await verify_ledger(reader, rules, progress=lambda s, e: progress.append((s, e)))
        assert (True, 6, 30, 30) == (found.ok, found.streams, found.events, found.index_entries)
        assert (6, 30) == progress[-1]

    async def test_a_namespace_without_streams_verifies_empty(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        reader = BulkReader(client, store.keys)
        found = await verify_ledger(reader, AuditRules())
        assert (True, 0, 0) == (found.ok, found.streams, found.index_entries)


class TestForeignKeys:
    async def test_a_stream_key_that_names_no_pid_is_a_finding_not_a_crash(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        await client.xadd(store.keys.prefix + "s:zz-not-a-pid", {"e": "{}"}, id="0-1")
        reader = BulkReader(client, store.keys)
        rules = AuditRules(grace_ms=60_000, as_of_ms=time.time_ns() // 1_000_000 + 1)
        found = await verify_ledger(reader, rules)
        assert [("zz-not-a-pid", "stream_malformed")] == [
            (finding.pid, finding.kind) for finding in found.findings
        ]
        assert {"accepted": 1} == found.statuses
