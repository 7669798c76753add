"""The canonical host gate of first-party mode: every request must name the issuer's origin.

In first-party mode the same origin hosts the MCP endpoint, the authorization server and the
owner's passkeys (whose relying-party ID is the issuer host), so every route, /healthz
included, is served only under that one public name: the Host header equal to the issuer's
host (and port, when a private test issuer has one), at most one X-Forwarded-Host equal to it,
at most one X-Forwarded-Proto and only `https`, no percent-encoded path, a query of at most
8 KiB. `Forwarded` is never trusted. Anything else is 400 `invalid host`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from multidict import CIMultiDictProxy

MAX_QUERY_BYTES: Final = 8192
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def refused(headers: CIMultiDictProxy[str], raw_path: str, issuer_authority: str | None) -> bool:
    """Tell whether a request fails the gate; `issuer_authority` is host[:port] of the issuer
    (None when the configured issuer is not a valid origin: then every request fails)."""
    if issuer_authority is None:
        return True
    hosts = headers.getall("Host", [])
    if len(hosts) != 1 or hosts[0] != issuer_authority:
        return True
    forwarded_hosts = headers.getall("X-Forwarded-Host", [])
    if len(forwarded_hosts) > 1 or (forwarded_hosts and forwarded_hosts[0] != issuer_authority):
        return True
    protos = headers.getall("X-Forwarded-Proto", [])
    if len(protos) > 1 or (protos and protos[0] != "https"):
        return True
    path, _, query = raw_path.partition("?")
    if not path.startswith("/"):  # an absolute-form target names its own scheme and host
        return True
    return "%" in path or len(query.encode()) > MAX_QUERY_BYTES


def canonical_host_gate(
    issuer: str | None,
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Build the aiohttp middleware that refuses every request off the issuer's origin
    (`https://host[:port]`; None refuses everything)."""
    issuer_authority = None if issuer is None else issuer.removeprefix("https://")

    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if refused(request.headers, request.raw_path, issuer_authority):
            return web.Response(status=400, text="invalid host")
        return await handler(request)

    return gate
