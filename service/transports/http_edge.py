"""The /mcp edge: ASGI middleware that answers, in front of the SDK's app, what it gets wrong.

Only `path` itself is served: any other path, /mcp/ included, is 404. The SDK's router would
redirect /mcp/ to /mcp with a URL built from the scheme it sees, which behind a TLS proxy is
http://; and one resource URL is what the token's audience and the resource metadata name, so a
client configured with /mcp/ fails at once rather than at the token.

For /mcp, in order: a foreign Host is 421 and a foreign Origin 403 (DNS rebinding: the public
resource host, or every loopback spelling we bind to); with a bearer gate, a request without a
valid token gets its 401 or 403 challenge before anything else is looked at; any method but POST
is 405 (stateless JSON mode has no server-initiated stream for a GET to open); a body over
the limit is 413; then screen() answers malformed or oversized JSON, batches and invalid
envelopes with short JSON-RPC errors, and an unknown MCP-Protocol-Version header gets the
protocol's UnsupportedProtocolVersion error (-32022) rather than the SDK's complaint about a
missing _meta. A POST the SDK refuses on its headers alone (Content-Type, Accept) goes to the
SDK unread. Everything else reaches the SDK untouched.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, unsupported_protocol_version_rejection
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.auth.resource.bearer import BearerGate
from service.transports.host_policy import HostPolicy
from service.transports.jsonrpc_edge import (
    MAX_MESSAGE_BYTES,
    TOO_LONG,
    YIELD_ABOVE,
    EdgeError,
    RequestId,
    invalid_request,
    screen,
)

SERVED_VERSIONS: Final = frozenset(HANDSHAKE_PROTOCOL_VERSIONS + MODERN_PROTOCOL_VERSIONS)
FOREIGN_HOST: Final = invalid_request("the Host header does not name this server")
FOREIGN_ORIGIN: Final = invalid_request("cross-origin requests are not served")


class McpEdge:
    """Wrap the SDK's ASGI app; only requests for `path` are checked."""

    def __init__(
        self,
        app: ASGIApp,
        policy: HostPolicy,
        gate: BearerGate | None = None,
        path: str = "/mcp",
    ) -> None:
        self.app = app
        self.policy = policy
        self.gate = gate
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the request here or pass it on to the SDK."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] != self.path:
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._foreign(headers)
        if refusal is None and self.gate is not None:
            refusal = await self.gate.admit(scope, headers)
        if refusal is None and scope["method"] != "POST":
            refusal = Response(status_code=405, headers={"Allow": "POST"})
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if not _json_exchange(scope, headers):  # the SDK refuses it without reading the body
            await self.app(scope, receive, send)
            return
        body = await _read_body(headers, receive)
        if body is None:
            await _error_response(TOO_LONG, 413)(scope, receive, send)
            return
        verdict = screen(body)
        if isinstance(verdict, EdgeError):
            await _error_response(verdict)(scope, receive, send)
            return
        unsupported = _unsupported_version(headers, verdict.id)
        if unsupported is not None:
            await _error_response(unsupported)(scope, receive, send)
            return
        if len(body) > YIELD_ABOVE:
            await asyncio.sleep(0)
        await self.app(scope, _replay(body, receive), send)

    def _foreign(self, headers: Headers) -> Response | None:
        hosts = headers.getlist("host")
        if len(hosts) != 1 or not self.policy.allows_host(hosts[0]):
            return _error_response(FOREIGN_HOST, 421)
        origins = headers.getlist("origin")
        if len(origins) > 1 or not self.policy.allows_origin(origins[0] if origins else None):
            return _error_response(FOREIGN_ORIGIN, 403)
        return None


def _json_exchange(scope: Scope, headers: Headers) -> bool:
    """A JSON body, and a client that accepts a JSON answer (as the SDK tests them)."""
    accepts_json, _ = check_accept_headers(Request(scope))
    return accepts_json and headers.get("content-type", "").lower().startswith("application/json")


async def _read_body(headers: Headers, receive: Receive) -> bytes | None:
    """The whole body, or None when it is (or is declared) longer than the limit."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_MESSAGE_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: nothing will be answered
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _unsupported_version(headers: Headers, request_id: RequestId | None) -> EdgeError | None:
    for requested in headers.getlist("mcp-protocol-version"):
        if requested not in SERVED_VERSIONS:
            rejection = unsupported_protocol_version_rejection(requested)
            if rejection is not None:
                return EdgeError(rejection.code, rejection.message, request_id, rejection.data)
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """Hand the SDK the body already read, then the original channel (for disconnects)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def _error_response(error: EdgeError, status: int | None = None) -> Response:
    code_status: Any = ERROR_CODE_HTTP_STATUS.get(error.code, 400)
    return Response(
        error.encode(), status_code=status or code_status, media_type="application/json"
    )
