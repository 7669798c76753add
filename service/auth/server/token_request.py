"""Validation of a token request before any state is read: method, headers, body and form."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import msgspec

from schemas.scopes import Scope
from service.auth.server.authorize_request import RegisteredClient, parse_scope, single_valued
from service.auth.server.errors import OAuthError
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


class CodeExchange(msgspec.Struct, frozen=True):
    """An authorization_code grant request, well formed."""

    client_id: str
    code: str
    code_verifier: str
    redirect_uri: str


class RefreshRequest(msgspec.Struct, frozen=True):
    """A refresh_token grant request, well formed; scopes None keeps the grant's."""

    client_id: str
    refresh_token: str
    scopes: tuple[Scope, ...] | None


def validate_token_request(
    *,
    query: str,
    has_authorization: bool,
    content_type: str,
    body: bytes,
    clients: Mapping[str, RegisteredClient],
    resource: str,
) -> CodeExchange | RefreshRequest:
    """Check a POST to /oauth/token (the route answers other methods 405); OAuthError if not."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if query or has_authorization or media_type != "application/x-www-form-urlencoded":
        raise OAuthError(400, "invalid_request")
    if len(body) > MAX_BODY_BYTES:
        raise OAuthError(400, "invalid_request")
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        raise OAuthError(400, "invalid_request") from None
    form = single_valued(text)
    if form is None or any(name in form for name in FORBIDDEN_PARAMETERS):
        raise OAuthError(400, "invalid_request")
    client = clients.get(form.get("client_id", ""))
    if client is None:
        raise OAuthError(400, "invalid_client")
    if form.get("resource") != resource:
        raise OAuthError(400, "invalid_target")
    grant_type = form.get("grant_type")
    if grant_type == "authorization_code":
        return _code_exchange(form, client)
    if grant_type == "refresh_token":
        return _refresh(form, client)
    raise OAuthError(400, "unsupported_grant_type")


def _code_exchange(form: Mapping[str, str], client: RegisteredClient) -> CodeExchange:
    if "refresh_token" in form or "scope" in form:
        raise OAuthError(400, "invalid_request")
    code, verifier = form.get("code", ""), form.get("code_verifier", "")
    redirect_uri = form.get("redirect_uri", "")
    if not encodes_bytes(code, SECRET_BYTES) or not _VERIFIER.fullmatch(verifier):
        raise OAuthError(400, "invalid_grant")
    if redirect_uri not in client.redirect_uris:
        raise OAuthError(400, "invalid_grant")
    return CodeExchange(client.client_id, code, verifier, redirect_uri)


def _refresh(form: Mapping[str, str], client: RegisteredClient) -> RefreshRequest:
    if any(name in form for name in ("code", "code_verifier", "redirect_uri")):
        raise OAuthError(400, "invalid_request")
    token = form.get("refresh_token", "")
    if not encodes_bytes(token, SECRET_BYTES):
        raise OAuthError(400, "invalid_grant")
    scopes = None
    if "scope" in form:
        scopes = parse_scope(form["scope"])
        if scopes is None:
            raise OAuthError(400, "invalid_scope")
    return RefreshRequest(client.client_id, token, scopes)
