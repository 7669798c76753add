"""`verify`'s scan against a real Redis (and the embedded one): plain XREAD reads, the fast pass,
and the forked shards give exactly the summary of the generic audit, tampered ledgers included."""

from __future__ import annotations

import time

import msgspec
import pytest
import redis.asyncio as aioredis

from ledger.audit import AuditRules, Finding, LedgerAudit, group_index, missing_stream_findings
from ledger.audit_fast import index_text
from ledger.audit_read import BulkReader
from ledger.audit_run import items_are_pid, verify_ledger
from ledger.audit_scan import RawReader, full_check, index_digest
from ledger.store import LedgerStore
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


async def reference_verify(reader: BulkReader, rules: AuditRules) -> LedgerAudit:
    """The audit as verify did it before the fast scan: generic reads, full checks, in order."""
    summary = LedgerAudit()
    index = await reader.index()
    summary.index_entries = len(index)
    by_pid = group_index(index)
    pids = sorted(set(await reader.stream_pids()))
    for start in range(0, len(pids), 256):
        chunk = pids[start : start + 256]
        _, groups = await reader.streams(chunk)
        for pid, items in zip(chunk, groups, strict=True):
            summary.add(*full_check(pid, items, by_pid.pop(pid, []), rules))
    for pid, indexed in sorted(by_pid.items()):
        if not items_are_pid(pid):
            summary.findings.append(Finding(pid, 0, "index_malformed", "index names no pid"))
            continue
        summary.findings += missing_stream_findings(pid, indexed, rules)
    return summary


def without_time(audit: LedgerAudit) -> LedgerAudit:
    return msgspec.structs.replace(audit, elapsed_s=0.0)


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


class TestIndexDigests:
    async def test_the_streamed_digests_are_those_of_each_pids_index_text(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        await varied_ledger(store, client)
        pids = sorted(set(await BulkReader(client, store.keys).stream_pids()))
        key = bytes(32)
        async with RawReader(client, store.keys) as raw:
            count, groups = await raw.index_groups()
            same_count, digests, orphans = await raw.index_digests(pids, key)
        texts = {pid: index_text(groups[pid.encode()]) for pid in pids if pid.encode() in groups}
        expected = {pid.encode(): index_digest(t, key) for pid, t in texts.items() if t}
        assert (count, expected) == (same_count, digests)
        assert {b"not-a-pid"} <= set(orphans) and not set(orphans) & {p.encode() for p in pids}


class TestScanEquivalence:
    @pytest.mark.parametrize("workers", [1, 2])
    async def test_verify_reports_what_the_generic_audit_reports(
        self, store: LedgerStore, client: aioredis.Redis, workers: int
    ) -> None:
        await varied_ledger(store, client)
        reader = BulkReader(client, store.keys)
        rules = AuditRules(grace_ms=60_000, as_of_ms=time.time_ns() // 1_000_000 + 1)
        expected = await reference_verify(reader, rules)
        found = await verify_ledger(reader, rules, workers=workers)
        assert without_time(expected) == without_time(found)
        assert {"hash_mismatch", "missing_field", "missing_stream", "index_malformed"} <= {
            finding.kind for finding in found.findings
        }

    async def test_a_sound_ledger_scanned_in_two_shards_verifies_every_event(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        for _ in range(6):
            pid, head = await claimed_send(store)
            await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        progress: list[tuple[int, int]] = []
        reader = BulkReader(client, store.keys)
        rules = AuditRules(grace_ms=60_000, as_of_ms=time.time_ns() // 1_000_000 + 1)
        found = await verify_ledger(
            reader, rules, workers=2, progress=lambda s, e: progress.append((s, e))
        )
        assert (True, 6, 30, 30) == (found.ok, found.streams, found.events, found.index_entries)
        assert (6, 30) == progress[-1]

    async def test_a_namespace_without_streams_verifies_empty(
        self, store: LedgerStore, client: aioredis.Redis
    ) -> None:
        reader = BulkReader(client, store.keys)
        found = await verify_ledger(reader, AuditRules(), workers=2)
        assert (True, 0, 0) == (found.ok, found.streams, found.index_entries)


class TestForeignKeys:
    @pytest.mark.parametrize("workers", [1, 2])
    async def test_a_stream_key_that_names_no_pid_is_a_finding_not_a_crash(
        self, store: LedgerStore, client: aioredis.Redis, workers: int
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
        await client.xadd(store.keys.prefix + "s:zz-not-a-pid", {"e": "{}"}, id="0-1")
        reader = BulkReader(client, store.keys)
        rules = AuditRules(grace_ms=60_000, as_of_ms=time.time_ns() // 1_000_000 + 1)
        found = await verify_ledger(reader, rules, workers=workers)
        assert [("zz-not-a-pid", "stream_malformed")] == [
            (finding.pid, finding.kind) for finding in found.findings
        ]
        assert {"accepted": 1} == found.statuses
