"""Validation of an authorization request, in the order that decides where an error may go.

Until the client and its exact redirect URI are known, an error is a 400 page for the owner
naming the failed check (never a redirect to an unvalidated destination); after that, errors go
back to the client's redirect URI with `error`, `iss` and the `state` when one was sent. Either
is an AuthorizeError, raised. The query is the raw one from the request line, decoded once here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol
from urllib.parse import parse_qsl, urlencode

import msgspec

from schemas.scopes import Scope, parse_scope_list
from service.auth.server.errors import AuthorizeError
from service.config import redirect_uri_matches
from service.wire.b64url import encodes_bytes

MAX_QUERY_BYTES: Final = 8192
MAX_STATE_BYTES: Final = 1024
MAX_SCOPE_CHARS: Final = 64
FORBIDDEN_PARAMETERS: Final = (
    "request",
    "request_uri",
    "client_secret",
    "client_assertion",
    "client_assertion_type",
)


class RegisteredClient(Protocol):
    """A client as configuration knows it."""

    @property
    def client_id(self) -> str: ...

    @property
    def client_name(self) -> str: ...

    @property
    def redirect_uris(self) -> tuple[str, ...]: ...


class AuthorizeRequest(msgspec.Struct, frozen=True):
    """A validated request, ready for sign-in and consent."""

    client_id: str
    redirect_uri: str
    state: str  # "" when the client sent none (PKCE, always required, carries the CSRF role)
    code_challenge: str
    scopes: tuple[Scope, ...]  # canonical order
    client_name: str = ""  # as configuration or the client's metadata document names it


def parse_scope(value: str | None) -> tuple[Scope, ...] | None:
    """Return the requested scopes in canonical order, or None when the string is not valid."""
    if value is None or len(value) > MAX_SCOPE_CHARS:
        return None
    return parse_scope_list(value)  # the same rule as the configured scope lists


def single_valued(query: str) -> dict[str, str] | None:
    """Decode a raw query once; None when a parameter repeats or a value is not UTF-8."""
    try:
        return _params(query)
    except AuthorizeError:
        return None


def _params(query: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise AuthorizeError("invalid_request", rule="query_not_utf8") from None
    params = dict(pairs)
    if len(params) != len(pairs):
        raise AuthorizeError("invalid_request", rule="repeated_parameter")
    return params


def validate_authorize(
    query: str, clients: Mapping[str, RegisteredClient], resource: str
) -> AuthorizeRequest:
    """Check a raw /oauth/authorize query against the registered clients and this resource."""
    if len(query.encode()) > MAX_QUERY_BYTES:
        raise AuthorizeError("invalid_request", rule="query_too_long")
    params = _params(query)
    client = _client(params, clients)
    redirect_uri = params.get("redirect_uri")
    if not redirect_uri:
        raise AuthorizeError("invalid_client", rule="redirect_uri_missing")
    if not redirect_uri_matches(client.redirect_uris, redirect_uri):
        raise AuthorizeError("invalid_client", rule="redirect_uri_not_registered")
    state = params.get("state")
    error = _redirected_error(params, state, resource)
    if error is not None:
        good_state = state if state is not None and _state_ok(state) else None
        raise AuthorizeError(error, redirect_uri, good_state)
    scopes = parse_scope(params.get("scope"))
    if scopes is None:
        raise AuthorizeError("invalid_scope", redirect_uri, state)
    return AuthorizeRequest(
        client.client_id,
        redirect_uri,
        state or "",
        params["code_challenge"],
        scopes,
        client.client_name,
    )


def _client(params: Mapping[str, str], clients: Mapping[str, RegisteredClient]) -> RegisteredClient:
    client_id = params.get("client_id")
    if not client_id:
        raise AuthorizeError("invalid_client", rule="client_id_missing")
    client = clients.get(client_id)
    if client is None:
        raise AuthorizeError("invalid_client", rule="unknown_client")
    return client


def _redirected_error(params: Mapping[str, str], state: str | None, resource: str) -> str | None:
    if state is not None and not _state_ok(state):  # absent is fine; sent must be usable
        return "invalid_request"
    if params.get("response_type") != "code":
        return "unsupported_response_type"
    if params.get("resource") != resource:
        return "invalid_target"
    challenge = params.get("code_challenge", "")
    # An S256 challenge is the base64url of a 32-byte SHA-256 digest.
    if params.get("code_challenge_method") != "S256" or not encodes_bytes(challenge, 32):
        return "invalid_request"
    if params.get("response_mode", "query") != "query":
        return "invalid_request"
    if any(name in params for name in FORBIDDEN_PARAMETERS):
        return "invalid_request"
    return None


def _state_ok(state: str) -> bool:
    return (
        0 < len(state.encode()) <= MAX_STATE_BYTES
        and state == state.strip()
        and not any(ord(char) < 32 or ord(char) == 127 for char in state)
    )


def redirect_with(redirect_uri: str, params: Sequence[tuple[str, str]]) -> str:
    """Append parameters to a registered redirect URI (which may already carry a query)."""
    separator = "&" if "?" in redirect_uri else "?"
    return f"{redirect_uri}{separator}{urlencode(params)}"


def refusal_location(refusal: AuthorizeError, issuer: str) -> str | None:
    """Where a redirected refusal sends the browser: error, iss and state (when sent and valid)."""
    if refusal.redirect_uri is None:
        return None
    params = [("error", refusal.error), ("iss", issuer)]
    if refusal.state:
        params.append(("state", refusal.state))
    return redirect_with(refusal.redirect_uri, params)
