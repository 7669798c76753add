"""Token requests refused before any state is read, and the two well-formed grant shapes."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

import pytest

from service.auth.server.errors import OAuthError as TokenError
from service.auth.server.token_request import (
    CodeExchange,
    RefreshRequest,
    validate_token_request,
)

RESOURCE = "https://mail.example.com/mcp"
CALLBACK = "https://claude.ai/api/mcp/auth_callback"
CODE = "c" * 42 + "A"
VERIFIER = "v" * 43
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Client:
    client_id: str
    redirect_uris: tuple[str, ...]


CLIENTS = {"angelos-claude": Client("angelos-claude", (CALLBACK,))}
EXCHANGE = {
    "grant_type": "authorization_code",
    "client_id": "angelos-claude",
    "code": CODE,
    "code_verifier": VERIFIER,
    "redirect_uri": CALLBACK,
    "resource": RESOURCE,
}
REFRESH = {
    "grant_type": "refresh_token",
    "client_id": "angelos-claude",
    "refresh_token": CODE,
    "resource": RESOURCE,
}


def check(
    form: dict[str, str],
    *,
    query: str = "",
    authorization: bool = False,
    content_type: str = FORM,
    body: bytes | None = None,
) -> CodeExchange | RefreshRequest | TokenError:
    """The validated request, or the refusal it raised."""
    try:
        return validate_token_request(
            query=query,
            has_authorization=authorization,
            content_type=content_type,
            body=urlencode(form).encode() if body is None else body,
            clients=CLIENTS,
            resource=RESOURCE,
        )
    except TokenError as refused:
        return refused


def test_a_code_exchange_is_well_formed() -> None:
    assert CodeExchange("angelos-claude", CODE, VERIFIER, CALLBACK) == check(EXCHANGE)


def test_a_refresh_may_narrow_its_scopes() -> None:
    found = check({**REFRESH, "scope": "mail.read"})
    assert RefreshRequest("angelos-claude", CODE, ("mail.read",)) == found


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": "x=1"},
        {"authorization": True},
        {"content_type": "application/json"},
        {"body": b"a=" + b"x" * 16384},
        {"body": urlencode(EXCHANGE).encode() + b"&code=again"},
        {"body": urlencode({**EXCHANGE, "client_secret": "s"}).encode()},
        {"body": urlencode({**EXCHANGE, "password": "p"}).encode()},
    ],
    ids=["query", "authorization", "json", "too-long", "repeated", "secret", "password"],
)
def test_malformed_requests_are_invalid_request(kwargs: dict[str, object]) -> None:
    assert TokenError(400, "invalid_request") == check(EXCHANGE, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"client_id": "other"}, TokenError(400, "invalid_client")),
        ({"resource": "https://mail.example.com/x"}, TokenError(400, "invalid_target")),
        ({"grant_type": "password"}, TokenError(400, "unsupported_grant_type")),
        ({"code": "short"}, TokenError(400, "invalid_grant")),
        ({"code_verifier": "v" * 42}, TokenError(400, "invalid_grant")),
        ({"redirect_uri": "https://claude.ai/other"}, TokenError(400, "invalid_grant")),
        ({"scope": "mail.read"}, TokenError(400, "invalid_request")),
    ],
)
def test_code_exchange_refusals(changes: dict[str, str], expected: TokenError) -> None:
    assert expected == check({**EXCHANGE, **changes})


def test_a_refresh_with_code_parameters_is_invalid_request() -> None:
    assert TokenError(400, "invalid_request") == check({**REFRESH, "code": CODE})


def test_a_refresh_with_a_bad_scope_is_invalid_scope() -> None:
    assert TokenError(400, "invalid_scope") == check({**REFRESH, "scope": "mail.send"})
