"""Run the HTTP transport: aiohttp on one port, the MCP app mounted at /mcp."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
from typing import Any

import structlog
from aiohttp import web
from mcp.server import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings

from service.app import build_app
from service.auth.canonical_host import canonical_host_gate
from service.auth.resource.bearer import BearerGate, principal_in
from service.auth.resource.jwt import TokenRules
from service.auth.resource.key_cache import HttpsKeySource, KeyCache
from service.auth.resource.verifier import TokenVerifier
from service.auth.wiring import BrowserFactory, FirstParty
from service.config import Config, HttpAuthConfig
from service.context import AppContext
from service.mcp_server import PrincipalSource, build_server
from service.principal import Principal, local_principal
from service.readiness import send_health
from service.transports.host_policy import HostPolicy, loopback_policy, resource_policy
from service.transports.http import build_http_app
from service.transports.http_edge import McpEdge
from service.transports.http_listener import MAX_HEADER_LINE_BYTES, handler_factory
from service.transports.jsonrpc_edge import MAX_MESSAGE_BYTES

log = structlog.get_logger("angelos.http")
BIND_ERRORS = {
    errno.EADDRINUSE: "the address is already in use (another process holds this port)",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "this machine has no such address",
}


class ClientGone(logging.Filter):
    """Drop aiohttp's error record for an answer to a client that has already left.

    aiohttp logs it with a traceback at error level; nothing failed on our side.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but those caused by a closed client connection."""
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, ConnectionError)


class HttpService:
    """The aiohttp app, with the application context and key cache it must start and close."""

    def __init__(
        self,
        web_app: web.Application,
        app: AppContext | None,
        keys: KeyCache | None,
        first_party: FirstParty | None = None,
    ):
        self.web_app = web_app
        self.app = app
        self.keys = keys
        self.first_party = first_party

    async def aclose(self) -> None:
        """Close the key cache's and the authorization server's connections, then the app."""
        if self.keys is not None:
            await self.keys.aclose()
        if self.first_party is not None:
            await self.first_party.server.aclose()
        if self.app is not None:
            await self.app.aclose()


def bearer_gate(auth: HttpAuthConfig) -> tuple[BearerGate, KeyCache]:
    """Build the token verifier for the configured issuer; keys are fetched on first use."""
    rules = TokenRules(auth.issuer, auth.resource_url, frozenset(auth.allowed_subjects))
    keys = KeyCache(HttpsKeySource(auth.jwks_url, auth.ca_file, auth.allow_private_hosts))
    return BearerGate(TokenVerifier(rules, keys), auth.metadata_url, auth.initial_scopes), keys


def _bearer_principal(ctx: ServerRequestContext[Any, Any]) -> Principal:
    """The Principal the bearer gate stored in this HTTP request's ASGI scope."""
    request = ctx.request
    if request is None:  # only HTTP requests reach this server, each through the gate
        raise RuntimeError("a tool call arrived without its HTTP request")
    return principal_in(request.scope)


def unconfigured_gate(config: Config) -> Any:
    """First-party mode that failed validation still answers only under the issuer's name (and
    nothing at all when the issuer itself is not a valid origin): no fallback."""
    return canonical_host_gate(config.first_party_origin)


def _owner_browser() -> BrowserFactory:
    from service.auth.server.browser import OwnerBrowser  # webauthn is loaded only when used

    return OwnerBrowser


def http_service(
    config: Config,
    host: str,
    port: int,
    owner: str | None,
    browser: BrowserFactory | None = None,
) -> HttpService:
    """Build the HTTP service: bearer-authenticated, a loopback owner's, or 503 on /mcp.

    With a first-party configuration the authorization server is added (with the owner's
    browser flow unless another is given) and the bearer gate trusts only the tokens it issued.
    """
    auth = config.http_auth
    principal_ready = config.local is not None if owner is not None else auth is not None
    if config.mail is None or config.store is None or not principal_ready:
        log.warning("MCP unavailable: mailbox or OAuth configuration is incomplete or invalid")
        outer = [unconfigured_gate(config)] if config.first_party_enabled else []
        return HttpService(build_http_app(config, None, middlewares=outer), None, None)
    gate: BearerGate | None = None
    keys: KeyCache | None = None
    first_party: FirstParty | None = None
    policy: HostPolicy
    principal_of: PrincipalSource
    if owner is not None:
        assert config.local is not None
        principal = local_principal(owner, config.local.scopes)
        principal_of, policy = (lambda ctx: principal), loopback_policy(host, port)
        app = build_app(config)
    else:
        assert auth is not None
        principal_of = _bearer_principal
        policy = resource_policy(auth.resource_authority)
        app = build_app(config, resource_metadata_url=auth.metadata_url)
        if config.first_party is not None:
            first_party = FirstParty(config.first_party, auth, app, browser or _owner_browser())
            gate, keys = first_party.gate, first_party.keys
        else:
            gate, keys = bearer_gate(auth)
    server = build_server(app, principal_of)
    asgi = server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        max_request_body_size=MAX_MESSAGE_BYTES,
        # McpEdge checks Host and Origin before anything else; the SDK's own check knows only
        # 127.0.0.1, localhost and ::1 and would run later.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    edge = McpEdge(asgi, policy, gate)

    def sending() -> dict[str, object]:
        return send_health(app)

    if first_party is None:
        return HttpService(build_http_app(config, edge, sending=sending), app, keys)
    web_app = build_http_app(
        config, edge, middlewares=first_party.middlewares(), add_routes=first_party.add_routes,
        sending=sending,
    )  # fmt: skip
    return HttpService(web_app, app, keys, first_party)


def app_runner(web_app: web.Application) -> web.AppRunner:
    """The aiohttp runner with our header limits and without an access log."""
    return web.AppRunner(
        web_app,
        access_log=None,
        max_line_size=MAX_HEADER_LINE_BYTES,
        max_field_size=MAX_HEADER_LINE_BYTES,
    )


class CannotListen(Exception):
    """The port cannot be bound; the message is the one line to show."""


async def listen(runner: web.AppRunner, host: str, port: int) -> asyncio.Server:
    """Accept connections for the runner's app through our connection protocol."""
    loop = asyncio.get_running_loop()
    assert runner.server is not None  # set by runner.setup()
    try:
        return await loop.create_server(handler_factory(runner.server, loop), host, port)
    except OSError as error:
        reason = BIND_ERRORS.get(error.errno or 0, error.strerror or type(error).__name__)
        raise CannotListen(f"angelos cannot listen on {host} port {port}: {reason}") from None


async def run_http(config: Config, host: str, port: int, owner: str | None) -> int:
    """Serve until SIGTERM or SIGINT, then close connections; 1 when the port cannot be bound."""
    logging.getLogger("aiohttp.server").addFilter(ClientGone())
    service = http_service(config, host, port, owner)
    runner = app_runner(service.web_app)
    listener: asyncio.Server | None = None
    try:
        if service.app is not None:
            await service.app.start()
        await runner.setup()
        try:
            listener = await listen(runner, host, port)
        except CannotListen as error:
            log.error(str(error))
            return 1
        log.info("Angelos listening", host=host, port=port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        return 0
    finally:
        if listener is not None:
            listener.close()  # stop accepting; the runner then closes the open connections
        await runner.cleanup()
        await service.aclose()
