"""Stateless streamable HTTP on one aiohttp port: /mcp, /healthz and resource metadata."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from aiohttp import web

from schemas.scopes import SCOPE_ORDER
from service.config import Config
from service.context import VERSION
from service.transports.asgi_bridge import mount_asgi
from service.transports.jsonrpc_edge import MAX_MESSAGE_BYTES

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
log = structlog.get_logger("angelos.http")


async def _security_headers(request: web.BaseRequest, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


@web.middleware
async def _reject_bad_host(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    if any(ch in request.headers.get("Host", "") for ch in "\r\n"):
        return web.Response(status=400, text="invalid host")
    try:  # the ASGI bridge builds the URL from Host; yarl refuses e.g. a port of 99999
        request.url  # noqa: B018
    except ValueError:
        return web.Response(status=400, text="invalid host")
    return await handler(request)


def healthz_body(
    config: Config, configured: bool, sending: dict[str, object] | None = None
) -> dict[str, Any]:
    """Describe the service for /healthz without secrets or any network check.

    `sending` tells whether a send could start now and, if not, why (the gate, or the ledger
    store's last reading: not durable, or gone back in time and halted until a person
    acknowledges it).
    """
    body: dict[str, Any] = {"service": "angelos", "version": VERSION, "configured": configured}
    if config.mail is not None:
        body["mail_provider"] = config.mail.provider
        body["mail_auth_mode"] = config.mail.auth_mode
    if sending is not None:
        body["sending"] = sending
    return body


def build_http_app(
    config: Config,
    asgi_app: Any | None,
    *,
    middlewares: Sequence[Any] = (),
    add_routes: Callable[[web.Application], None] | None = None,
    sending: Callable[[], dict[str, object]] | None = None,
) -> web.Application:
    """Build the aiohttp application; without an ASGI app, /mcp answers 503 (fail closed).

    First-party mode adds its gate in `middlewares` (before every other check) and its
    authorization-server routes through `add_routes`.
    """
    app = web.Application(
        middlewares=[*middlewares, _reject_bad_host], client_max_size=MAX_MESSAGE_BYTES
    )
    app.on_response_prepare.append(_security_headers)
    configured = asgi_app is not None

    async def healthz(request: web.Request) -> web.StreamResponse:
        if request.method != "GET":
            return web.Response(status=405)
        return web.json_response(
            healthz_body(config, configured, None if sending is None else sending())
        )

    async def resource_metadata(request: web.Request) -> web.StreamResponse:
        auth = config.http_auth
        if auth is None:
            raise web.HTTPNotFound()
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        document = {
            "resource": auth.resource_url,
            "authorization_servers": [auth.issuer],
            "scopes_supported": list(SCOPE_ORDER),
            "bearer_methods_supported": ["header"],
        }
        response = web.json_response(document, headers={"Cache-Control": "public, max-age=300"})
        if request.method == "HEAD":
            response.body = b""
        return response

    async def not_configured(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text="Angelos is not configured")

    app.router.add_route("*", "/healthz", healthz)
    app.router.add_route("*", "/.well-known/oauth-protected-resource", resource_metadata)
    app.router.add_route("*", "/.well-known/oauth-protected-resource/mcp", resource_metadata)
    if add_routes is not None:
        add_routes(app)
    if asgi_app is None:
        app.router.add_route("*", "/mcp", not_configured)
    else:
        mount_asgi(app, asgi_app)
    return app
