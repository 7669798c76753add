"""Authorization requests: a 400 naming the failed check until the client and redirect are
known, redirects after; the raw query is decoded exactly once."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest

from service.auth.server import authorize_request
from service.auth.server.authorize_request import (
    AuthorizeRequest,
    RegisteredClient,
    parse_scope,
    refusal_location,
    single_valued,
)
from service.auth.server.errors import AuthorizeError as AuthorizeRefusal
from service.config import Client

RESOURCE = "https://mail.example.com/mcp"
ISSUER = "https://mail.example.com"
CALLBACK = "https://claude.ai/api/mcp/auth_callback"
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 43).digest()).rstrip(b"=").decode()


CLIENTS = {"angelos-claude": Client("angelos-claude", "Claude", (CALLBACK,))}
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
        AuthorizeRequest(
            "angelos-claude", CALLBACK, "st-1", CHALLENGE, ("mail.read", "mail.send"), "Claude"
        )
        == validate()
    )


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"client_id": "unknown"}, "unknown_client"),
        ({"client_id": None}, "client_id_missing"),
        ({"client_id": ""}, "client_id_missing"),
        ({"redirect_uri": "https://attacker.example/cb"}, "redirect_uri_not_registered"),
        ({"redirect_uri": CALLBACK + "/"}, "redirect_uri_not_registered"),
        ({"redirect_uri": None}, "redirect_uri_missing"),
    ],
)
def test_an_unknown_client_or_redirect_is_an_unredirected_invalid_client(
    changes: dict[str, str | None], rule: str
) -> None:
    assert AuthorizeRefusal("invalid_client", rule=rule) == validate(**changes)


def test_a_repeated_parameter_is_an_unredirected_invalid_request() -> None:
    query = urlencode(GOOD) + "&state=again"
    assert AuthorizeRefusal("invalid_request", rule="repeated_parameter") == validate_authorize(
        query, CLIENTS, RESOURCE
    )


def test_an_over_long_query_is_an_unredirected_invalid_request() -> None:
    query = urlencode({**GOOD, "pad": "x" * 8192})
    assert AuthorizeRefusal("invalid_request", rule="query_too_long") == validate_authorize(
        query, CLIENTS, RESOURCE
    )


def test_a_value_that_is_not_utf8_is_an_unredirected_invalid_request() -> None:
    query = urlencode(GOOD) + "&nonce=%FF"
    assert AuthorizeRefusal("invalid_request", rule="query_not_utf8") == validate_authorize(
        query, CLIENTS, RESOURCE
    )
    assert None is single_valued("a=%FF")


def test_a_doubly_encoded_redirect_uri_does_not_match_the_registered_one() -> None:
    # Decoded once it is "https%3A%2F%2Fclaude.ai...", which is not the registered callback.
    query = urlencode({**GOOD, "redirect_uri": quote(CALLBACK, safe="")})
    assert f"redirect_uri={quote(quote(CALLBACK, safe=''), safe='')}" in query
    assert AuthorizeRefusal(
        "invalid_client", rule="redirect_uri_not_registered"
    ) == validate_authorize(query, CLIENTS, RESOURCE)


def test_the_query_is_decoded_exactly_once() -> None:
    assert {"state": "x%41", "q": "a b+c"} == single_valued("state=x%2541&q=a+b%2Bc")


def test_a_request_without_state_is_accepted_with_an_empty_state() -> None:
    accepted = validate(state=None)
    assert isinstance(accepted, AuthorizeRequest) and "" == accepted.state


def test_a_state_comes_back_exactly_as_sent() -> None:
    state = "x%41 &=é/?#"
    refusal = validate(state=state, response_type="token")
    assert isinstance(refusal, AuthorizeRefusal)
    location = refusal_location(refusal, ISSUER) or ""
    assert [state] == parse_qs(urlsplit(location).query)["state"]
    accepted = validate(state=state)
    assert isinstance(accepted, AuthorizeRequest) and state == accepted.state


def test_a_redirected_error_without_state_carries_none() -> None:
    refusal = validate(state=None, response_type="token")
    assert isinstance(refusal, AuthorizeRefusal)
    location = refusal_location(refusal, ISSUER) or ""
    assert {"error": ["unsupported_response_type"], "iss": [ISSUER]} == parse_qs(
        urlsplit(location).query
    )


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"state": ""}, "invalid_request"),
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
