"""An OAuth token endpoint the test controls, over TLS on loopback, standing in for Google's and
Microsoft's.

It serves both pinned paths (`/token` and `/<tenant>/oauth2/v2.0/token`) with the test CA's
server certificate, whose names include oauth2.googleapis.com and login.microsoftonline.com;
`token_endpoint()` reroutes those two pinned hosts here through the product's test seam and
undoes it afterwards. A test picks how the endpoint answers (`behaviour`), can hold answers
until it releases them, and reads every request it received.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from aiohttp import web

from providers.netsafety import clear_reroutes_for_tests, reroute_for_tests
from providers.oauth2.profiles import GOOGLE_MAIL_SCOPE, GOOGLE_TOKEN_HOST, MICROSOFT_TOKEN_HOST

OVERSIZED_BYTES = 1024 * 1024  # streamed in 16 KiB chunks: far past the client's 64 KiB


class Behaviour(Enum):
    """How the endpoint answers a refresh request."""

    NORMAL = "normal"  # 200 with a minted access token
    OVERSIZED = "oversized"  # 200 whose body runs to a megabyte, with no declared length
    OVERSIZED_DECLARED = "oversized-declared"  # the same, with its Content-Length
    REVOKED = "revoked"  # 400 {"error": "invalid_grant", ...}, as Google answers a revoked token
    ERROR_MEMBER = "error-member"  # 200 whose object names an error
    DUPLICATE_MEMBER = "duplicate-member"  # access_token twice
    TRAILING_DATA = "trailing-data"  # a valid object followed by more
    WRONG_TOKEN_TYPE = "wrong-token-type"  # token_type "mac"
    BAD_ACCESS_TOKEN = "bad-access-token"  # a space inside the token
    FRACTIONAL_LIFETIME = "fractional-lifetime"  # expires_in 3600.0
    INSUFFICIENT_SCOPE = "insufficient-scope"  # scope names other scopes only
    HEADERS_OVER_16_KIB = "headers-over-16-kib"  # 24 headers of 1 KiB each, none too long alone
    HEADER_OVER_16_KIB = "header-over-16-kib"  # one header line of 20 KiB
    COMPRESSED = "compressed"  # a gzip-labelled body although identity was asked for
    SERVER_ERROR = "server-error"  # 503
    REDIRECT = "redirect"  # 302 to another path on the same host
    REDIRECT_307 = "redirect-307"  # 307, which would repeat the POST with its form


@dataclass(frozen=True)
class TokenRequest:
    """One request as the endpoint received it."""

    method: str
    path: str
    headers: dict[str, str]
    form: dict[str, list[str]]


Mint = Callable[[TokenRequest], str]


def opaque_token(_request: TokenRequest) -> str:
    """A random opaque access token (the default minter)."""
    return "ya29." + secrets.token_urlsafe(32)


@dataclass
class TokenEndpoint:
    """What the endpoint answers, and everything it was asked."""

    port: int
    behaviour: Behaviour = Behaviour.NORMAL
    mint: Mint = opaque_token
    expires_in: int = 3600
    scope: str | None = GOOGLE_MAIL_SCOPE  # the scope a normal answer names; None omits it
    returned_refresh_token: Callable[[], str] | None = None  # a refresh token in each answer
    held: bool = False  # when set, answers wait for release()
    requests: list[TokenRequest] = field(default_factory=list)
    strays: list[TokenRequest] = field(default_factory=list)  # requests to any other path
    minted: list[str] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _gate: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def count(self) -> int:
        """How many refresh requests arrived."""
        return len(self.requests)

    def release(self) -> None:
        """Let held answers go (and every later one)."""
        self.held = False
        self._gate.set()

    def normal_answer(self, request: TokenRequest) -> dict[str, object]:
        """The members of a normal answer (an extra one included, as providers add them)."""
        token = self.mint(request)
        self.minted.append(token)
        members: dict[str, object] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "ext_expires_in": self.expires_in,
        }
        if self.scope is not None:
            members["scope"] = self.scope
        if self.returned_refresh_token is not None:
            members["refresh_token"] = self.returned_refresh_token()
        return members


def _json(members: dict[str, object], status: int = 200) -> web.Response:
    return web.json_response(members, status=status)


def _raw(body: bytes, encoding: str | None = None) -> web.Response:
    headers = {"Content-Type": "application/json"}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    return web.Response(body=body, headers=headers)


async def _answer(
    state: TokenEndpoint, seen: TokenRequest, request: web.Request
) -> web.StreamResponse:
    kind = state.behaviour
    good = b'"token_type": "Bearer", "expires_in": 3600'
    if kind is Behaviour.NORMAL:
        return _json(state.normal_answer(seen))
    if kind is Behaviour.REVOKED:
        return _json(
            {"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
            status=400,
        )
    if kind is Behaviour.ERROR_MEMBER:
        return _json({"error": "invalid_grant", **state.normal_answer(seen)})
    if kind is Behaviour.DUPLICATE_MEMBER:
        return _raw(b'{"access_token": "first", "access_token": "second", ' + good + b"}")
    if kind is Behaviour.TRAILING_DATA:
        return _raw(b'{"access_token": "abc", ' + good + b"} {}")
    if kind is Behaviour.WRONG_TOKEN_TYPE:
        return _json({**state.normal_answer(seen), "token_type": "mac"})
    if kind is Behaviour.BAD_ACCESS_TOKEN:
        return _json({**state.normal_answer(seen), "access_token": "two words"})
    if kind is Behaviour.FRACTIONAL_LIFETIME:
        return _raw(b'{"access_token": "abc", "token_type": "Bearer", "expires_in": 3600.0}')
    if kind is Behaviour.INSUFFICIENT_SCOPE:
        return _json({**state.normal_answer(seen), "scope": "openid email"})
    if kind is Behaviour.COMPRESSED:
        return _raw(b'{"access_token": "abc", ' + good + b"}", encoding="gzip")
    if kind is Behaviour.HEADERS_OVER_16_KIB:
        padding = {f"X-Padding-{i}": "p" * 1024 for i in range(24)}
        return web.json_response(state.normal_answer(seen), headers=padding)
    if kind is Behaviour.HEADER_OVER_16_KIB:
        return web.json_response(state.normal_answer(seen), headers={"X-Padding": "p" * 20480})
    if kind is Behaviour.SERVER_ERROR:
        return _json({"error": "temporarily_unavailable"}, status=503)
    if kind in (Behaviour.REDIRECT, Behaviour.REDIRECT_307):
        status = 302 if kind is Behaviour.REDIRECT else 307
        location = f"https://{GOOGLE_TOKEN_HOST}/elsewhere"
        return web.Response(status=status, headers={"Location": location})
    return await _oversized(request, declared=kind is Behaviour.OVERSIZED_DECLARED)


async def _oversized(request: web.Request, *, declared: bool) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    if declared:
        response.content_length = OVERSIZED_BYTES
    await response.prepare(request)
    chunk = b" " * (16 * 1024)
    # A client that stopped reading closes the connection; the writes then fail, which is fine.
    with contextlib.suppress(ConnectionError):
        for _ in range(OVERSIZED_BYTES // len(chunk)):
            await response.write(chunk)
        await response.write_eof()
    return response


async def _recorded(request: web.Request) -> TokenRequest:
    form = await request.post()
    return TokenRequest(
        method=request.method,
        path=request.path,
        headers=dict(request.headers),
        form={name: [str(v) for v in form.getall(name)] for name in form},
    )


@contextlib.asynccontextmanager
async def token_endpoint(tls_dir: Path, ca_file: Path) -> AsyncIterator[TokenEndpoint]:
    """Serve a TokenEndpoint on a free loopback port and reroute both pinned token hosts to it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    state = TokenEndpoint(port=listener.getsockname()[1])

    async def refresh(request: web.Request) -> web.StreamResponse:
        seen = await _recorded(request)
        state.requests.append(seen)
        state.arrived.set()
        if state.held:
            await state._gate.wait()
        return await _answer(state, seen, request)

    async def stray(request: web.Request) -> web.StreamResponse:
        state.strays.append(await _recorded(request))
        return _json(state.normal_answer(state.strays[-1]))

    app = web.Application()
    app.router.add_post("/token", refresh)
    app.router.add_post("/{tenant}/oauth2/v2.0/token", refresh)
    app.router.add_route("*", "/{tail:.*}", stray)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.SockSite(runner, listener, ssl_context=context).start()
        reroute_for_tests(
            {
                (GOOGLE_TOKEN_HOST, 443): ("127.0.0.1", state.port),
                (MICROSOFT_TOKEN_HOST, 443): ("127.0.0.1", state.port),
            },
            str(ca_file),
        )
        yield state
    finally:
        clear_reroutes_for_tests()
        state.release()  # a held answer must not keep the server's shutdown waiting
        await runner.cleanup()
        listener.close()
