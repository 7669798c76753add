"""Opening an IMAP session: vetted DNS answers, dial in order, implicit TLS, greeting, login.

aioimaplib's IMAP4_SSL resolves and dials the host itself, which would reopen the
DNS-rebinding window that vetting at resolve time closes. So we resolve once, vet every answer,
dial the numeric addresses ourselves and hand the connected socket to aioimaplib's protocol for TLS,
verifying the certificate against the configured host name.

The login is LOGIN with the configured password, or SASL XOAUTH2 with a token from the
settings' `TokenSource`. A refused token is invalidated; when it was a cached copy, a refreshed
one gets one more try on a new connection (a login changes nothing on the server).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import TypeVar

from providers.imap.session import ImapSession, LoginRefused
from providers.imap.settings import ImapSettings
from providers.imap.wire import WireProtocol
from providers.netsafety import SockAddr, dial, resolve_destination, tls_context
from providers.oauth2.source import AccessToken, TokenSource
from schemas.errors import MailError, ServiceUnavailable

T = TypeVar("T")
Login = Callable[[ImapSession], Awaitable[None]]


def token_refused(tokens: TokenSource) -> str:
    """The refusal's message, naming the fix (a new grant, or the account's IMAP access)."""
    return (
        f"the IMAP server refused the OAuth access token: {tokens.recovery}, "
        "or check that IMAP access is enabled for the account"
    )


async def _dial(answers: list[tuple[int, SockAddr]]) -> socket.socket:
    sock = await dial(answers)
    if sock is None:
        raise ServiceUnavailable("could not connect to the mail host")
    return sock


async def connect(settings: ImapSettings) -> ImapSession:
    """Open, verify and log in one IMAP session; every failure is a typed error."""
    try:
        context = tls_context(settings.ca_file)
    except (OSError, ssl.SSLError):
        raise ServiceUnavailable("the configured CA file cannot be loaded") from None
    answers = await _within(
        settings.timeout_s,
        resolve_destination(
            settings.host, settings.port, allow_private_hosts=settings.allow_private_hosts
        ),
    )
    if settings.tokens is not None:
        return await _open_with_tokens(settings, settings.tokens, answers, context)

    async def login(session: ImapSession) -> None:
        await session.login(settings.username, settings.password)

    return await _within(settings.timeout_s, _open(settings, answers, context, login))


class _TokenLogin:
    """One XOAUTH2 login: the token is fetched only once the server has offered XOAUTH2."""

    def __init__(self, username: str, tokens: TokenSource) -> None:
        self._username = username
        self._tokens = tokens
        self.token: AccessToken | None = None

    async def __call__(self, session: ImapSession) -> None:
        session.require_xoauth2()
        self.token = await self._tokens.token()
        await session.authenticate_xoauth2(self._username, self.token)

    def refused(self) -> bool:
        """Invalidate the refused token; tell whether it was a cached copy (worth a refresh)."""
        assert self.token is not None  # LoginRefused comes only from authenticate_xoauth2
        self._tokens.invalidate(self.token.generation)
        return not self.token.fresh


async def _open_with_tokens(
    settings: ImapSettings,
    tokens: TokenSource,
    answers: list[tuple[int, SockAddr]],
    context: ssl.SSLContext,
) -> ImapSession:
    first = _TokenLogin(settings.username, tokens)
    try:
        return await _within(settings.timeout_s, _open(settings, answers, context, first))
    except LoginRefused:
        stale = first.refused()
    if not stale:  # a token fetched for this login was refused: refreshing again would not help
        raise ServiceUnavailable(token_refused(tokens))
    second = _TokenLogin(settings.username, tokens)
    try:
        return await _within(settings.timeout_s, _open(settings, answers, context, second))
    except LoginRefused:
        second.refused()
        raise ServiceUnavailable(token_refused(tokens)) from None


async def _open(
    settings: ImapSettings,
    answers: list[tuple[int, SockAddr]],
    context: ssl.SSLContext,
    login: Login,
) -> ImapSession:
    loop = asyncio.get_running_loop()
    sock = await _dial(answers)
    wire = WireProtocol(loop)
    try:
        transport, _ = await loop.create_connection(
            lambda: wire,
            sock=sock,
            ssl=context,
            server_hostname=settings.host,
            ssl_handshake_timeout=settings.timeout_s,
        )
    except (OSError, ssl.SSLError):
        sock.close()
        raise ServiceUnavailable("could not establish a verified TLS connection") from None
    except BaseException:
        sock.close()
        raise
    session = ImapSession(transport, wire, settings.timeout_s)
    try:
        await session.handshake()
        await login(session)
    except BaseException:
        await session.close()
        raise
    return session


async def _within(timeout_s: float, step: Awaitable[T]) -> T:
    try:
        async with asyncio.timeout(timeout_s):
            return await step
    except TimeoutError as exc:
        if isinstance(exc, MailError):
            raise
        raise ServiceUnavailable("the mail server did not answer in time") from None
