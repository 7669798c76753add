"""Authorization requests: JSON 400 until the client and redirect are known, redirects after."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from service.auth.server import authorize_request
from service.auth.server.authorize_request import (
    AuthorizeRequest,
    RegisteredClient,
    parse_scope,
    refusal_location,
)
from service.auth.server.errors import AuthorizeError as AuthorizeRefusal

RESOURCE = "https://mail.example.com/mcp"
ISSUER = "https://mail.example.com"
CALLBACK = "https://claude.ai/api/mcp/auth_callback"
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 43).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class Client:
    client_id: str
    redirect_uris: tuple[str, ...]


CLIENTS = {"angelos-claude": Client("angelos-claude", (CALLBACK,))}
GOOD = {
    "client_id": "angelos-claude",
    "redirect_uri": CALLBACK,
    "response_type": "code",
    "state": "st-1",
    "resource": RESOURCE,
    "code_challenge": CHALLENGE,
    "code_challenge_method": "S256",
    "scope": "mail.send mail.read",
}


def validate_authorize(
    query: str, clients: Mapping[str, RegisteredClient], resource: str
) -> AuthorizeRequest | AuthorizeRefusal:
    """The validated request, or the refusal it raised."""
    try:
        return authorize_request.validate_authorize(query, clients, resource)
    except AuthorizeRefusal as refused:
        return refused


def validate(**changes: str | None) -> AuthorizeRequest | AuthorizeRefusal:
    params = {k: v for k, v in {**GOOD, **changes}.items() if v is not None}
    return validate_authorize(urlencode(params), CLIENTS, RESOURCE)


def test_a_good_request_is_accepted_with_canonical_scopes() -> None:
    assert (
        AuthorizeRequest("angelos-claude", CALLBACK, "st-1", CHALLENGE, ("mail.read", "mail.send"))
        == validate()
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"client_id": "unknown"},
        {"redirect_uri": "https://attacker.example/cb"},
        {"redirect_uri": None},
    ],
)
def test_an_unknown_client_or_redirect_is_a_json_invalid_client(
    changes: dict[str, str | None],
) -> None:
    assert AuthorizeRefusal("invalid_client") == validate(**changes)


def test_a_repeated_parameter_is_a_json_invalid_request() -> None:
    query = urlencode(GOOD) + "&state=again"
    assert AuthorizeRefusal("invalid_request") == validate_authorize(query, CLIENTS, RESOURCE)


def test_an_over_long_query_is_a_json_invalid_request() -> None:
    query = urlencode({**GOOD, "pad": "x" * 8192})
    assert AuthorizeRefusal("invalid_request") == validate_authorize(query, CLIENTS, RESOURCE)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"state": None}, "invalid_request"),
        ({"state": " padded"}, "invalid_request"),
        ({"state": "s" * 1025}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"resource": "https://mail.example.com/other"}, "invalid_target"),
        ({"resource": None}, "invalid_target"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": CHALLENGE[:-1]}, "invalid_request"),
        ({"code_challenge": CHALLENGE[:-1] + "B"}, "invalid_request"),
        ({"response_mode": "fragment"}, "invalid_request"),
        ({"request_uri": "urn:x"}, "invalid_request"),
        ({"client_secret": "s"}, "invalid_request"),
        ({"scope": "mail.write"}, "invalid_scope"),
        ({"scope": "mail.read  mail.send"}, "invalid_scope"),
        ({"scope": "mail.read openid"}, "invalid_scope"),
        ({"scope": None}, "invalid_scope"),
    ],
)
def test_later_errors_go_back_to_the_client(changes: dict[str, str | None], error: str) -> None:
    refusal = validate(**changes)
    assert isinstance(refusal, AuthorizeRefusal)
    assert (error, CALLBACK) == (refusal.error, refusal.redirect_uri)


def test_a_redirected_error_carries_iss_and_a_valid_state() -> None:
    refusal = validate(response_type="token")
    assert isinstance(refusal, AuthorizeRefusal)
    location = refusal_location(refusal, ISSUER)
    assert location is not None and location.startswith(CALLBACK + "?")
    assert {"error": ["unsupported_response_type"], "iss": [ISSUER], "state": ["st-1"]} == parse_qs(
        urlsplit(location).query
    )


def test_an_invalid_state_is_not_echoed() -> None:
    refusal = validate(state=" bad")
    assert isinstance(refusal, AuthorizeRefusal)
    assert "state" not in parse_qs(urlsplit(refusal_location(refusal, ISSUER) or "").query)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("mail.read", ("mail.read",)),
        ("mail.send mail.write mail.read", ("mail.read", "mail.write", "mail.send")),
        ("", None),
        (" mail.read", None),
        ("mail.read\tmail.send", None),
        ("mail.read mail.read", None),
        ("mail.send", None),
    ],
)
def test_scope_strings(value: str, expected: tuple[str, ...] | None) -> None:
    assert expected == parse_scope(value)
