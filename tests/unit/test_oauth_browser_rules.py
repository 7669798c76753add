"""The browser flow's pure rules: bootstrap token shape and hash, approved scopes, challenges."""

from __future__ import annotations

import base64
import json
import secrets

import pytest

from schemas.secret import Secret
from service.auth.server.bootstrap import bootstrap_token_hash
from service.auth.server.browser.ceremonies import bootstrap_token_ok
from service.auth.server.browser.consent import approved_scopes
from service.auth.server.browser.passkeys import challenge_of


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@pytest.mark.parametrize("size", [32, 48, 64])
def test_a_token_of_32_to_64_bytes_with_the_configured_hash_passes(size: int) -> None:
    token = b64(secrets.token_bytes(size))
    assert bootstrap_token_ok(token, Secret(bootstrap_token_hash(token)))


@pytest.mark.parametrize("size", [0, 16, 31, 65])
def test_a_token_outside_32_to_64_bytes_fails_even_with_its_hash(size: int) -> None:
    token = b64(secrets.token_bytes(size))
    assert not bootstrap_token_ok(token, Secret(bootstrap_token_hash(token)))


def test_a_padded_or_standard_alphabet_token_fails_even_with_its_hash() -> None:
    raw = b"\xfb\xff" * 16
    for token in (base64.urlsafe_b64encode(raw).decode(), base64.b64encode(raw).decode()):
        assert not bootstrap_token_ok(token, Secret(bootstrap_token_hash(token)))


def test_another_token_or_no_configured_hash_fails() -> None:
    token = b64(secrets.token_bytes(32))
    assert not bootstrap_token_ok(b64(secrets.token_bytes(32)), Secret(bootstrap_token_hash(token)))
    assert not bootstrap_token_ok(token, None)
    assert not bootstrap_token_ok(None, Secret(bootstrap_token_hash(token)))


def test_approved_scopes_come_back_in_canonical_order() -> None:
    requested = ("mail.read", "mail.write", "mail.send")
    assert ("mail.read", "mail.send") == approved_scopes(["mail.send", "mail.read"], requested)


@pytest.mark.parametrize(
    "values",
    [
        ["mail.send"],
        ["mail.read", "mail.read"],
        ["mail.read", "mail.write"],
        ["mail.read", "x"],
        [],
    ],
    ids=["no mail.read", "repeated", "not requested", "unknown", "none"],
)
def test_approved_scopes_outside_the_rules_are_refused(values: list[str]) -> None:
    assert None is approved_scopes(values, ("mail.read", "mail.send"))


def test_the_challenge_is_read_from_client_data() -> None:
    data = json.dumps({"type": "webauthn.get", "challenge": "abc", "origin": "https://x"})
    assert "abc" == challenge_of(b64(data.encode()))


@pytest.mark.parametrize(
    "client_data",
    [b64(b"not json"), b64(b"[]"), b64(b'{"challenge": 5}'), "***", b64(b" " * 5000)],
    ids=["not json", "not an object", "not a string", "not base64url", "too large"],
)
def test_malformed_client_data_has_no_challenge(client_data: str) -> None:
    assert None is challenge_of(client_data)
