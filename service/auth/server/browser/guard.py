"""What every browser POST must show: one same-origin Origin, a same-origin fetch, the CSRF
value, and a small body of the declared type.

A failed check raises an OAuthError; the endpoint wrapper (`endpoint.py`) renders it as a page
or as JSON.
"""

from __future__ import annotations

import hmac
from typing import Final, TypeVar
from urllib.parse import parse_qsl

import msgspec
from aiohttp import web

from schemas.strict_json import StrictJsonError, parse_object
from service.auth.server.errors import OAuthError

MAX_BODY_BYTES: Final = 64 * 1024
MAX_JSON_DEPTH: Final = 8
FORM_TYPE: Final = "application/x-www-form-urlencoded"
JSON_TYPE: Final = "application/json"
CSRF_HEADER: Final = "X-CSRF-Token"

S = TypeVar("S", bound=msgspec.Struct)


def same_origin(request: web.Request, issuer: str) -> None:
    """Refuse a POST without exactly one Origin equal to the issuer, or sent cross-site."""
    origins = request.headers.getall("Origin", [])
    sites = request.headers.getall("Sec-Fetch-Site", [])
    if len(origins) != 1 or origins[0] != issuer or (sites and sites != ["same-origin"]):
        raise OAuthError(403, "cross_origin")


def csrf_matches(presented: str | None, expected: str) -> bool:
    """Compare a presented CSRF value with the session's, in constant time."""
    if presented is None or not expected:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "replace"), expected.encode("ascii"))


def header_csrf(request: web.Request) -> str | None:
    """The single X-CSRF-Token header, or None when it is missing or repeated."""
    values = request.headers.getall(CSRF_HEADER, [])
    return values[0] if len(values) == 1 else None


async def read_body(request: web.Request, media_type: str) -> bytes:
    """Read a body of the given media type, at most 64 KiB (415 for another type, 413 beyond)."""
    if request.content_type != media_type:
        raise OAuthError(415, "unsupported_media_type")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise OAuthError(413, "body_too_large")
    body = await request.content.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise OAuthError(413, "body_too_large")
    return body


async def read_form(request: web.Request) -> dict[str, list[str]]:
    """Read a URL-encoded form into every field's values (strict: no malformed pairs)."""
    body = await read_body(request, FORM_TYPE)
    try:
        pairs = parse_qsl(
            body.decode("ascii"), keep_blank_values=True, strict_parsing=bool(body), errors="strict"
        )
    except (UnicodeDecodeError, ValueError):
        raise OAuthError(400, "malformed_form") from None
    fields: dict[str, list[str]] = {}
    for name, value in pairs:
        fields.setdefault(name, []).append(value)
    return fields


def one(fields: dict[str, list[str]], name: str) -> str | None:
    """The value of a field given exactly once, else None."""
    values = fields.get(name, [])
    return values[0] if len(values) == 1 else None


async def read_json(request: web.Request, kind: type[S]) -> S:
    """Read a strict JSON object into `kind` (unknown members refused, no repeated names)."""
    body = await read_body(request, JSON_TYPE)
    try:
        value = parse_object(body, max_depth=MAX_JSON_DEPTH)
        return msgspec.convert(value, kind, strict=True)
    except (StrictJsonError, msgspec.ValidationError):
        raise OAuthError(400, "malformed_request") from None
