"""angelos's HTTP service with bearer authentication, in this process, against a test key server.

The resource URL names localhost and the listening port, so requests to 127.0.0.1 that send
`Host: localhost:<port>` (as `client()` does) pass the host check exactly as a reverse proxy's
forwarded requests would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
from aiohttp import web
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from service.config import load_config
from service.transports.serve_http import HttpService, app_runner, http_service
from support.angelos_process import free_port


@dataclass
class ResourceServer:
    """Where the service listens and what it was configured with."""

    port: int
    service: HttpService
    env: dict[str, str]

    @property
    def base(self) -> str:
        """The URL to dial (loopback address, real port)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        """The Host header of the public resource URL."""
        return f"localhost:{self.port}"

    @property
    def resource(self) -> str:
        """MCP_RESOURCE_URL."""
        return f"https://localhost:{self.port}/mcp"

    @property
    def metadata_url(self) -> str:
        """The root resource-metadata URL challenges point to."""
        return f"https://localhost:{self.port}/.well-known/oauth-protected-resource"

    def client(self, token: str, mode: str = "legacy") -> Client:
        """An MCP client that sends `Authorization: Bearer <token>` on every request."""
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}", "Host": self.host}, timeout=60
        )
        return Client(streamable_http_client(f"{self.base}/mcp", http_client=http), mode=mode)


class Issuer(Protocol):
    """What the resource server needs to know of an issuer."""

    @property
    def issuer(self) -> str: ...

    @property
    def jwks_url(self) -> str: ...


def auth_env(port: int, issuer: Issuer, ca_file: str, subjects: str) -> dict[str, str]:
    """The MCP_* settings of a resource server on `port` trusting `issuer`."""
    return {
        "MCP_RESOURCE_URL": f"https://localhost:{port}/mcp",
        "MCP_OAUTH_ISSUER": issuer.issuer,
        "MCP_OAUTH_JWKS_URL": issuer.jwks_url,
        "MCP_ALLOWED_SUBJECTS": subjects,
        "MCP_OAUTH_CA_FILE": ca_file,
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "1",
    }


@contextlib.asynccontextmanager
async def resource_server(
    env: Mapping[str, str],
    issuer: Issuer,
    subjects: str = "owner-123",
    extra: Mapping[str, str] | None = None,
) -> AsyncIterator[ResourceServer]:
    """Start the bearer-authenticated service on a free port; stop it after."""
    port = free_port()
    full: dict[str, Any] = {
        **env,
        **auth_env(port, issuer, env["MAIL_TLS_CA_FILE"], subjects),
        **(extra or {}),
    }
    config = load_config(full)
    assert config.http_auth is not None, config.problems
    service = http_service(config, "127.0.0.1", port, None)
    if service.app is not None:
        await service.app.start()
    runner = app_runner(service.web_app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield ResourceServer(port, service, full)
    finally:
        await runner.cleanup()
        await service.aclose()
