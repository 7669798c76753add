"""Validation of a token request before any state is read: method, headers, body and form.

The form is decoded as a tagged union on `grant_type` (one Struct per grant), then each grant's
parameters are checked. Every refusal is an OAuthError (400), raised in this order: the request
itself (invalid_request), the client (invalid_client), the resource (invalid_target), the grant
type (unsupported_grant_type), the other grant's parameters (invalid_request), then the grant's
own values (invalid_grant, then invalid_scope).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

import msgspec

from schemas.scopes import Scope
from service.auth.server.authorize_request import RegisteredClient, parse_scope, single_valued
from service.auth.server.errors import OAuthError
from service.config import redirect_uri_matches
from service.wire.b64url import encodes_bytes

MAX_BODY_BYTES: Final = 16384
SECRET_BYTES: Final = 32  # codes and refresh tokens: 32 random bytes, base64url
FORBIDDEN_PARAMETERS: Final = (
    "client_secret",
    "client_assertion",
    "client_assertion_type",
    "assertion",
    "username",
    "password",
)
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")


class CodeExchange(msgspec.Struct, frozen=True, tag_field="grant_type", tag="authorization_code"):
    """An authorization_code grant request (an absent parameter decodes as "")."""

    client_id: str
    code: str = ""
    code_verifier: str = ""
    redirect_uri: str = ""


class RefreshRequest(msgspec.Struct, frozen=True, tag_field="grant_type", tag="refresh_token"):
    """A refresh_token grant request; scopes None keeps the grant's."""

    client_id: str
    refresh_token: str = ""
    # `scope` on the wire, a space-separated list: parse_scope reads it after the token's check.
    scopes: tuple[Scope, ...] | None = msgspec.field(default=None, name="scope")


TokenRequest = CodeExchange | RefreshRequest
# A request of one grant may not carry the other grant's parameters.
_FOREIGN: Final[Mapping[type[TokenRequest], tuple[str, ...]]] = {
    CodeExchange: ("refresh_token", "scope"),
    RefreshRequest: ("code", "code_verifier", "redirect_uri"),
}


def validate_token_request(
    *,
    query: str,
    has_authorization: bool,
    content_type: str,
    body: bytes,
    clients: Mapping[str, RegisteredClient],
    resource: str,
    bound: Callable[[str], bool] = lambda client_id: False,
) -> TokenRequest:
    """Check a POST to /oauth/token (the route answers other methods 405); OAuthError if not.

    `bound` tells a client whose identity was bound at authorization (a metadata document
    client): it is not fetched again, and its code carries the exact redirect URI it was given.
    """
    form = _form(query, has_authorization, content_type, body)
    if form is None:
        raise OAuthError(400, "invalid_request")
    client_id = form.get("client_id", "")
    client = clients.get(client_id)
    if client is None and not bound(client_id):
        raise OAuthError(400, "invalid_client")
    if form.get("resource") != resource:
        raise OAuthError(400, "invalid_target")
    request = _decode(form)
    if any(name in form for name in _FOREIGN[type(request)]):
        raise OAuthError(400, "invalid_request")
    if isinstance(request, CodeExchange):
        return _checked_exchange(request, client)
    return _checked_refresh(request, form.get("scope"))


def _form(
    query: str, has_authorization: bool, content_type: str, body: bytes
) -> dict[str, str] | None:
    """The single-valued form of a bare urlencoded POST; None when the request is malformed."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if query or has_authorization or media_type != "application/x-www-form-urlencoded":
        return None
    if len(body) > MAX_BODY_BYTES:
        return None
    try:
        form = single_valued(body.decode("ascii"))
    except UnicodeDecodeError:
        return None
    if form is None or any(name in form for name in FORBIDDEN_PARAMETERS):
        return None
    return form


def _decode(form: Mapping[str, str]) -> TokenRequest:
    """The grant's Struct, chosen by `grant_type`. Every value is a string and every field but
    the tag and client_id (known by now) has a default, so only the tag can fail to decode."""
    fields = {name: value for name, value in form.items() if name != "scope"}
    try:
        request: TokenRequest = msgspec.convert(fields, TokenRequest, strict=True)
    except msgspec.ValidationError:
        raise OAuthError(400, "unsupported_grant_type") from None
    return request


def _checked_exchange(request: CodeExchange, client: RegisteredClient | None) -> CodeExchange:
    if not encodes_bytes(request.code, SECRET_BYTES) or not _VERIFIER.fullmatch(
        request.code_verifier
    ):
        raise OAuthError(400, "invalid_grant")
    # The code holds the exact URI its authorization was sent to (compared in exchange_code).
    if client is not None and not redirect_uri_matches(client.redirect_uris, request.redirect_uri):
        raise OAuthError(400, "invalid_grant")
    return request


def _checked_refresh(request: RefreshRequest, scope: str | None) -> RefreshRequest:
    if not encodes_bytes(request.refresh_token, SECRET_BYTES):
        raise OAuthError(400, "invalid_grant")
    if scope is None:
        return request
    scopes = parse_scope(scope)
    if scopes is None:
        raise OAuthError(400, "invalid_scope")
    return msgspec.structs.replace(request, scopes=scopes)
