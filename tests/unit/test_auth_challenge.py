"""The Bearer challenge strings: exact forms, and nothing but known scopes in a step-up."""

from __future__ import annotations

import pytest

from service.auth.resource.challenge import challenge, step_up_challenge, step_up_scope

M = "https://mail.example.com/.well-known/oauth-protected-resource"


def test_a_401_challenge_names_the_metadata_and_the_scope() -> None:
    assert f'Bearer resource_metadata="{M}", scope="mail.read"' == challenge(M, "mail.read")


def test_an_error_code_comes_last() -> None:
    expected = f'Bearer resource_metadata="{M}", scope="mail.read", error="invalid_token"'
    assert expected == challenge(M, "mail.read", "invalid_token")


@pytest.mark.parametrize(
    ("missing", "requested"),
    [
        ("mail.write mail.send", "mail.read mail.write mail.send"),
        ("mail.write", "mail.read mail.write"),
        ("mail.send", "mail.read mail.send"),
        ("mail.send mail.write", "mail.read"),
        ("", "mail.read"),
        ('"\r\nInjected: x', "mail.read"),
    ],
)
def test_a_step_up_requests_only_known_scope_sets(missing: str, requested: str) -> None:
    assert requested == step_up_scope(missing)


def test_injected_text_never_reaches_the_challenge() -> None:
    value = step_up_challenge(M, '"\r\nInjected: x', "d")
    assert "Injected" not in value and 'scope="mail.read"' in value
