"""The seal of the OAuth store: AES-256-GCM, and the XOR seal written before it still opens."""

from __future__ import annotations

import base64

import pytest

from service.auth.server.store.errors import StoreCorrupt
from service.auth.server.store.keys import seal, unseal
from support.oauth_store import random_token, xor_sealed


def token() -> str:
    return random_token().reveal()


def flipped(sealed: str, index: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4)))
    raw[index] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def test_a_value_sealed_before_aes_gcm_still_unseals() -> None:
    gid, refresh = token(), token()
    old = xor_sealed(gid, "refresh-grant", refresh)
    assert 43 == len(old)
    assert gid == unseal(old, purpose="refresh-grant", key=refresh)


def test_a_seal_opens_under_its_key_and_purpose_only() -> None:
    gid, code = token(), token()
    sealed = seal(gid, purpose="code-grant", key=code)
    assert gid == unseal(sealed, purpose="code-grant", key=code)
    assert 82 == len(sealed) and sealed != seal(gid, purpose="code-grant", key=code)
    with pytest.raises(StoreCorrupt):
        unseal(sealed, purpose="refresh-grant", key=code)
    with pytest.raises(StoreCorrupt):
        unseal(sealed, purpose="code-grant", key=token())


@pytest.mark.parametrize("index", [0, 1, 12, 13, 44, 60])  # version, nonce, body, tag
def test_a_tampered_seal_is_refused(index: int) -> None:
    gid, code = token(), token()
    sealed = seal(gid, purpose="code-grant", key=code)
    with pytest.raises(StoreCorrupt):
        unseal(flipped(sealed, index), purpose="code-grant", key=code)


@pytest.mark.parametrize("sealed", ["", "not base64url!", "A" * 42, "A" * 81, "A" * 83])
def test_a_malformed_seal_is_refused(sealed: str) -> None:
    with pytest.raises(StoreCorrupt):
        unseal(sealed, purpose="code-grant", key=token())
