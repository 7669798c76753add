"""MCP over stdin/stdout for one local client."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from service.app import build_app
from service.config import Config, LocalPrincipal
from service.mcp_server import build_server
from service.principal import local_principal
from service.transports.stdio_pipes import pipe_stdio


async def run_stdio(config: Config, local: LocalPrincipal) -> None:
    """Serve until the client closes stdin, then release pooled connections."""
    app = build_app(config)
    await app.start()
    principal = local_principal(local.owner, local.scopes)
    server = build_server(app, lambda ctx: principal)
    try:
        async with pipe_stdio() as pipes:
            lines, out = pipes if pipes is not None else (None, None)
            async with stdio_server(lines, out) as (read_stream, write_stream):  # type: ignore[arg-type]
                await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await app.aclose()
