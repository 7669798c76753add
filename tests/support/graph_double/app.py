"""The double's HTTPS server: the checks every request passes, faults, and the record of each."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from aiohttp import web

from providers.netsafety import clear_reroutes_for_tests, reroute_for_tests
from support.graph_double import ids
from support.graph_double.errors import DEFAULT_CODES, GraphError, error_body, new_request_id
from support.graph_double.faults import (
    ApplyThenStatus,
    Delay,
    Drop,
    Exchange,
    Fault,
    Injection,
    Status,
)
from support.graph_double.imap import Imap
from support.graph_double.routes import Call, Reply, Route, find_route
from support.graph_double.store import Store
from support.services import Services

GRAPH_HOST = "graph.microsoft.com"
ACCOUNT_ID = "5e1f0c2ad9a84b6fa1c0d4e3f2b1a097"
MAX_IN_FLIGHT = 4  # Graph's limit of concurrent requests to one mailbox
MAX_BODY = 64 * 1024 * 1024
JSON_TYPE = (
    "application/json;odata.metadata=minimal;odata.streaming=true;"
    "IEEE754Compatible=false;charset=utf-8"
)
WWW_AUTHENTICATE = (
    'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/'
    'authorize", client_id="00000003-0000-0000-c000-000000000000"'
)
IMMUTABLE = re.compile(r'(?i)\s*idtype\s*=\s*"immutableid"\s*')
CONCURRENCY = "Application is over its MailboxConcurrency limit."
_KEEP = object()


@dataclass(frozen=True)
class Identity:
    """What /me answers."""

    id: str
    mail: str | None
    upn: str


class Dropped(Exception):
    """The connection is to be aborted with no answer."""


class GraphDouble:
    """A contract double of Microsoft Graph's mail API for one mailbox (see the package doc)."""

    def __init__(self, store: Store, mail: str) -> None:
        self.store = store
        self.account_id = ACCOUNT_ID
        self.mail = mail
        self.port = 0
        self.base_url = f"https://{GRAPH_HOST}/v1.0"
        self.exchanges: list[Exchange] = []
        self.strays: list[Exchange] = []
        self.sent: list[bytes] = []
        self.page_cap: int | None = None
        self.who = Identity(ACCOUNT_ID, mail, mail)
        self._accepted: set[str] = set()
        self._revoked: set[str] = set()
        self._injections: list[Injection] = []
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """How many requests are being answered right now."""
        return self._in_flight

    def identity(self, *, id: object = _KEEP, mail: object = _KEEP, upn: object = _KEEP) -> None:
        """Change what /me answers (a member not given stays; mail may be None)."""
        changes = {k: v for k, v in (("id", id), ("mail", mail), ("upn", upn)) if v is not _KEEP}
        self.who = replace(self.who, **changes)  # type: ignore[arg-type]

    def accept_token(self, value: str) -> None:
        """Accept this bearer token (exact match) from now on."""
        self._revoked.discard(value)
        self._accepted.add(value)

    def revoke_tokens(self) -> None:
        """Every token accepted so far now gets 401 InvalidAuthenticationToken."""
        self._revoked |= self._accepted
        self._accepted.clear()

    def inject(self, method: str, path: str, fault: Fault, times: int = 1) -> None:
        """Answer the next `times` requests of `method` whose path after /v1.0 fullmatches."""
        self._injections.append(Injection(method.upper(), re.compile(path), fault, times))

    def reset_faults(self) -> None:
        """Forget every injected fault not yet used."""
        self._injections.clear()

    def _take_fault(self, method: str, route: str) -> Fault | None:
        for injection in self._injections:
            if injection.matches(method, route):
                injection.times -= 1
                if injection.times <= 0:
                    self._injections.remove(injection)
                return injection.fault
        return None

    def _gate(self, request: web.Request) -> None:
        """Graph's bearer token, then the contract's Accept and Prefer headers."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if token not in self._accepted:
            if not token:
                message = "Access token is empty."
            elif token in self._revoked:
                message = "Access token has expired or is not yet valid."
            else:
                message = "Access token validation failure."
            raise GraphError(401, "InvalidAuthenticationToken", message)
        accept = request.headers.get("Accept", "")
        if not any(
            r.split(";")[0].strip().lower() == "application/json" for r in accept.split(",")
        ):
            raise GraphError(400, "BadRequest", "This contract needs Accept: application/json.")
        prefer = request.headers.getall("Prefer", [])
        if not any(IMMUTABLE.fullmatch(p) for v in prefer for p in v.split(",")):
            raise GraphError(
                400,
                "BadRequest",
                'This contract needs Prefer: IdType="ImmutableId" (immutable ids).',
            )

    async def _apply(self, route: Route, call: Call) -> Reply:
        try:
            return await route.handler(call)
        except ids.MalformedId:
            return _error(400, "ErrorInvalidIdMalformed", "Id is malformed.")
        except GraphError as e:
            return _error(e.status, e.code, e.message)

    async def _serve(self, request: web.Request, ex: Exchange, route: Route, call: Call) -> Reply:
        self._gate(request)
        fault = self._take_fault(request.method, ex.route)
        ex.fault = fault
        if isinstance(fault, Status):
            reply = _error(fault.code, fault.error_code, f"Injected fault: {fault.code}.")
            if fault.retry_after is not None:
                reply.headers["Retry-After"] = str(fault.retry_after)
            return reply
        if isinstance(fault, ApplyThenStatus):
            await self._apply(route, call)
            return _error(fault.code, fault.error_code, f"Injected fault: {fault.code}.")
        if isinstance(fault, Drop):
            if fault.apply:
                await self._apply(route, call)
            raise Dropped
        if isinstance(fault, Delay):
            if fault.apply:
                reply = await self._apply(route, call)
                await asyncio.sleep(fault.seconds)
                return reply
            await asyncio.sleep(fault.seconds)
            if request.transport is None or request.transport.is_closing():
                raise Dropped  # the client gave up while it waited: nothing is applied
        return await self._apply(route, call)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every request: record it, route it, check it, maybe fault it, answer it."""
        body = await request.read()
        ex = Exchange(
            request.method, request.path, list(request.query.items()), dict(request.headers), body
        )
        self.exchanges.append(ex)
        request_id = new_request_id()
        client_id = request.headers.get("client-request-id")
        found = find_route(request.method, ex.route) if request.path.startswith("/v1.0/") else None
        if found is None or any(name not in found[0].options for name, _ in ex.query):
            self.strays.append(ex)
            reply = _error(400, "BadRequest", "This request is not part of the contract.")
        elif self._in_flight >= MAX_IN_FLIGHT:
            reply = _error(429, "MailboxConcurrency", CONCURRENCY)
            reply.headers["Retry-After"] = "1"
        else:
            route, params = found
            call = Call(self, self.store, request.path, ex.query, request.headers, body, params)
            self._in_flight += 1
            try:
                reply = await self._serve(request, ex, route, call)
            except GraphError as e:
                reply = _error(e.status, e.code, e.message)
            except Dropped:
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=500)  # never sent: the connection is gone
            except Exception as e:  # a failure of the double itself, shown to the test
                reply = _error(500, "generalException", f"The double failed: {e!r}")
            finally:
                self._in_flight -= 1
        return _respond(ex, reply, request_id, client_id)


def _error(status: int, code: str | None, message: str) -> Reply:
    code = code or DEFAULT_CODES.get(status, "UnknownError")
    reply = Reply(status, {"error": {"code": code, "message": message}}, "ODataError")
    if status == 401:
        reply.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    return reply


def _respond(ex: Exchange, reply: Reply, request_id: str, client_id: str | None) -> web.Response:
    headers = {"request-id": request_id, "client-request-id": client_id or request_id}
    headers.update(reply.headers)
    if reply.model == "ODataError" and reply.json is not None:
        error = reply.json["error"]
        body = error_body(error["code"], error["message"], request_id, client_id)
    elif reply.json is not None:
        body = json.dumps(reply.json).encode()
    else:
        body = reply.raw or b""
    if reply.json is not None:
        headers["Content-Type"] = JSON_TYPE
    elif reply.raw is not None:
        headers["Content-Type"] = "text/plain"
    if reply.status < 400:
        headers["Preference-Applied"] = 'IdType="ImmutableId"'
    ex.status, ex.response_body, ex.model = reply.status, body, reply.model
    return web.Response(status=reply.status, body=body if body else None, headers=headers)


@contextlib.asynccontextmanager
async def graph_double(services: Services) -> AsyncIterator[GraphDouble]:
    """Serve a GraphDouble over TLS on loopback and reroute graph.microsoft.com:443 to it."""
    if not services.graph_user:
        raise RuntimeError("this scripts/test-services run has no Graph user (MAILTEST_GRAPH_USER)")
    imap = Imap(
        services.imap_host,
        services.imap_port,
        services.graph_user,
        services.graph_password,
        services.ssl_context(),
    )
    double = GraphDouble(Store(imap), services.graph_user)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    double.port = listener.getsockname()[1]
    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_route("*", "/{tail:.*}", double.handle)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(
        services.dir / "tls" / "server.crt", services.dir / "tls" / "server.key"
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await double.store.folder("msgfolderroot")  # logs in now, so a bad login fails here
        await web.SockSite(runner, listener, ssl_context=context).start()
        reroute_for_tests({(GRAPH_HOST, 443): ("127.0.0.1", double.port)}, str(services.ca_file))
        yield double
    finally:
        clear_reroutes_for_tests()  # the seam has no way to take back one route alone
        await runner.cleanup()
        listener.close()
        await imap.close()
