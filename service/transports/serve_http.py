"""Run the HTTP transport: aiohttp on one port, the MCP app mounted at /mcp."""

from __future__ import annotations

import asyncio
import logging
import signal

import structlog
from aiohttp import web
from mcp.server.transport_security import TransportSecuritySettings

from service.app import build_app
from service.config import Config
from service.context import AppContext
from service.mcp_server import build_server
from service.principal import local_principal
from service.transports.host_policy import loopback_policy
from service.transports.http import build_http_app
from service.transports.http_edge import McpEdge
from service.transports.jsonrpc_edge import MAX_MESSAGE_BYTES

log = structlog.get_logger("angelos.http")


class ClientGone(logging.Filter):
    """Drop aiohttp's error record for an answer to a client that has already left.

    aiohttp logs it with a traceback at error level; nothing failed on our side.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but those caused by a closed client connection."""
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, ConnectionError)


def http_application(
    config: Config, host: str, port: int, owner: str
) -> tuple[web.Application, AppContext | None]:
    """Build the aiohttp app; bad mailbox or store configuration serves 503 on /mcp."""
    mcp_ready = config.mail is not None and config.store is not None and config.local is not None
    if not mcp_ready:
        log.warning("MCP unavailable: mailbox or store configuration is incomplete or invalid")
        return build_http_app(config, None), None
    assert config.local is not None
    app = build_app(config)
    principal = local_principal(owner, config.local.scopes)
    server = build_server(app, lambda ctx: principal)
    asgi = server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        max_request_body_size=MAX_MESSAGE_BYTES,
        # McpEdge checks Host and Origin before anything else, for every loopback spelling;
        # the SDK's own check knows only 127.0.0.1, localhost and ::1 and would run later.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return build_http_app(config, McpEdge(asgi, loopback_policy(host, port))), app


async def run_http(config: Config, host: str, port: int, owner: str) -> None:
    """Serve until SIGTERM or SIGINT, then close connections."""
    logging.getLogger("aiohttp.server").addFilter(ClientGone())
    web_app, app = http_application(config, host, port, owner)
    if app is not None:
        await app.start()
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    log.info("Angelos listening", host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        if app is not None:
            await app.aclose()
