"""The first-party token profile and the online grant check, in front of the verifier."""

from __future__ import annotations

import time
from typing import Any

import pytest

from service.auth.resource.key_cache import KeyCache, LocalKeySource
from service.auth.resource.verifier import AuthFailure, TokenVerifier
from support.tokens import ABSENT, Minter

GOOD = {
    "aud": "https://mail.example.com/mcp",
    "jti": "j" * 43,
    "gid": "g" * 43,
    "client_id": "angelos-claude",
    "scope": "mail.read mail.send",
}


class Grants:
    """A grant store that answers as told and counts the questions."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.asked: list[tuple[str, str, str, tuple[str, ...]]] = []

    async def __call__(
        self, gid: str, client_id: str, subject: str, scopes: tuple[str, ...]
    ) -> bool:
        self.asked.append((gid, client_id, subject, scopes))
        return self.active


def verifier(minter: Minter, grants: Grants) -> TokenVerifier:
    cache = KeyCache(LocalKeySource(minter.jwks()))
    return TokenVerifier(minter.rules, cache, lambda: float(minter.now), grants)


def first_party(minter: Minter, **overrides: Any) -> str:
    claims = {**GOOD, "iat": minter.now - 10, "exp": minter.now + 290, **overrides}
    return minter.token(minter.ec, claims=claims)


async def test_a_well_formed_token_of_an_active_grant_is_accepted() -> None:
    minter, grants = Minter(now=int(time.time())), Grants(active=True)
    principal = await verifier(minter, grants).principal(first_party(minter))
    assert frozenset({"mail.read", "mail.send"}) == principal.scopes
    assert [("g" * 43, "angelos-claude", "owner-123", ("mail.read", "mail.send"))] == grants.asked


async def test_a_revoked_grant_is_401_at_once() -> None:
    minter = Minter(now=int(time.time()))
    with pytest.raises(AuthFailure) as refused:
        await verifier(minter, Grants(active=False)).principal(first_party(minter))
    assert (401, "grant") == (refused.value.status, refused.value.rule)


@pytest.mark.parametrize(
    ("overrides", "rule"),
    [
        ({"gid": ABSENT}, "fp-gid"),
        ({"client_id": ABSENT}, "fp-client_id"),
        ({"jti": ABSENT}, "fp-jti"),
        ({"iat": ABSENT}, "fp-lifetime"),
        ({"exp": "LIFETIME_301"}, "fp-lifetime"),
        ({"aud": ["https://mail.example.com/mcp"]}, "fp-aud"),
        ({"scope": "mail.read mail.delete"}, "fp-scope"),
        ({"scope": "mail.read mail.read"}, "fp-scope"),
        ({"scope": ""}, "fp-scope"),
        ({"gid": "a b"}, "fp-gid"),
        ({"client_id": "c" * 513}, "fp-client_id"),
    ],
)
async def test_a_token_off_the_profile_never_reaches_the_grant_store(
    overrides: dict[str, Any], rule: str
) -> None:
    minter, grants = Minter(now=int(time.time())), Grants(active=True)
    if overrides.get("exp") == "LIFETIME_301":
        overrides = {"iat": minter.now - 10, "exp": minter.now + 291}
    with pytest.raises(AuthFailure) as refused:
        await verifier(minter, grants).principal(first_party(minter, **overrides))
    assert (401, rule, []) == (refused.value.status, refused.value.rule, grants.asked)


async def test_the_local_key_set_is_a_copy() -> None:
    minter = Minter(now=int(time.time()))
    document = bytearray(minter.jwks())
    cache = KeyCache(LocalKeySource(document))  # type: ignore[arg-type]
    document[:] = b'{"keys": []}'
    assert await cache.key_for(minter.ec.kid, "ES256") is not None
