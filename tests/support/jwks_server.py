"""A document server the test controls (an issuer's JWKS, a client's metadata) over TLS on loopback.

Tests publish a document, rotate keys, or make it answer an error status or a redirect, and
read how many times angelos fetched it.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from support.angelos_process import free_port


@dataclass
class JwksServer:
    """The published document and what happened to it."""

    port: int
    document: bytes = b'{"keys": []}'
    status: int = 200
    redirect_to: str | None = None
    content_type: str = "application/json"
    cache_control: str | None = None
    fetches: int = 0
    headers_seen: list[dict[str, str]] = field(default_factory=list)

    @property
    def issuer(self) -> str:
        """The issuer URL tokens name in `iss` (origin of the key server, trailing slash)."""
        return f"https://localhost:{self.port}/"

    @property
    def jwks_url(self) -> str:
        """Where angelos fetches the keys."""
        return f"https://localhost:{self.port}/jwks.json"


@contextlib.asynccontextmanager
async def jwks_server(tls_dir: Path) -> AsyncIterator[JwksServer]:
    """Serve a JwksServer on a free loopback port with the test CA's localhost certificate."""
    state = JwksServer(port=free_port())

    async def jwks(request: web.Request) -> web.StreamResponse:
        state.fetches += 1
        state.headers_seen.append(dict(request.headers))
        if state.redirect_to is not None:
            raise web.HTTPFound(state.redirect_to)
        headers = {} if state.cache_control is None else {"Cache-Control": state.cache_control}
        return web.Response(
            body=state.document,
            status=state.status,
            content_type=state.content_type,
            headers=headers,
        )

    app = web.Application()
    app.router.add_get("/jwks.json", jwks)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", state.port, ssl_context=context)
    await site.start()
    try:
        yield state
    finally:
        await runner.cleanup()
