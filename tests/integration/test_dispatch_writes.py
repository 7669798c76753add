"""A dispatcher's ledger writes survive annotation storms and stop only when recovery decided."""

from __future__ import annotations

from typing import Any

import pytest

import ledger.store.ledger_store
from ledger.dispatch.writes import Closed, DispatchSettings, Run, RunWriter
from ledger.ids import new_id
from ledger.store.lease import Lease
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.ledger_events import DuplicateConfirm, RecoveryClassified
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, DIGEST, DISPATCHER, OWNER
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    backend_fixture,  # noqa: F401
    claimed_send,
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
    namespace_fixture,  # noqa: F401
    store_fixture,  # noqa: F401
)

ACTOR = f"dispatcher:{DISPATCHER}"


async def writer_for(store: LedgerStore) -> RunWriter:
    lease = Lease(store, lease_ms=30_000, refresh_ms=10_000)
    await lease.refresh()
    return RunWriter(store, lease, DispatchSettings(), ACTOR, "api:test")


def annotate_before_each_write(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch, times: int
) -> list[int]:
    """Slip a duplicate_confirm annotation in before each of the dispatcher's next writes."""
    original = store.append
    slipped: list[int] = []

    async def noisy(pid: str, head: Any, data: Any, **kwargs: Any) -> Any:
        if kwargs.get("actor") == ACTOR and len(slipped) < times:
            _, entries = await store.read(pid)
            current = head_of(entries)
            note = DuplicateConfirm(observed_status="sending")
            await original(pid, current, note, actor="api:test", eid=new_id())
            slipped.append(1)
        return await original(pid, head, data, **kwargs)

    monkeypatch.setattr(store, "append", noisy)
    # Without the store's own rebuilds every slipped annotation reaches the writer as a conflict.
    monkeypatch.setattr(ledger.store.ledger_store, "MAX_REBUILDS", 0)
    return slipped


def run_at(pid: str, head: Any) -> Run:
    run = Run(pid, OWNER, DIGEST, False)
    run.head = head
    return run


class TestAnnotationStorms:
    async def test_annotations_between_writes_never_close_the_dispatch(
        self, store: LedgerStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pid, head = await claimed_send(store)
        writer = await writer_for(store)
        slipped = annotate_before_each_write(store, monkeypatch, times=6)
        run = run_at(pid, head)
        assert await writer.gate(run, ATTEMPT)
        assert await writer.gate(run, COMMIT)
        assert "now" == await writer.close(run, ACCEPTED)
        _, entries = await store.read(pid)
        lifecycle = [e.t for e in entries if e.t != "duplicate_confirm"]
        assert 6 == len(slipped)
        assert [
            "prepared", "claimed", "smtp_attempt_started", "smtp_commit_point", "smtp_accepted"
        ] == lifecycle  # fmt: skip
        assert "late_outcome_observed" not in [e.t for e in entries]

    async def test_a_dispatch_closed_by_recovery_is_closed_for_the_writer(
        self, store: LedgerStore
    ) -> None:
        pid, head = await claimed_send(store)
        writer = await writer_for(store)
        closing = RecoveryClassified(
            classification="not_attempted", stage="not_attempted", claim_age_ms=1,
            last_lifecycle_type="claimed",
        )  # fmt: skip
        decided = await store.append(
            pid, head, closing, actor="recovery:test", eid=new_id(), lease_of=DISPATCHER
        )
        assert "appended" == decided.result
        with pytest.raises(Closed):
            await writer.gate(run_at(pid, head), ATTEMPT)
