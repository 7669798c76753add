"""Opening an IMAP session: vetted DNS answers, dial in order, implicit TLS, greeting, LOGIN.

aioimaplib's IMAP4_SSL resolves and dials the host itself, which would reopen the
DNS-rebinding window that vetting at resolve time closes. So we resolve once, vet every answer,
dial the numeric addresses ourselves and hand the connected socket to aioimaplib's protocol for TLS,
verifying the certificate against the configured host name.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable
from typing import TypeVar

from providers.imap.session import ImapSession
from providers.imap.settings import ImapSettings
from providers.imap.wire import WireProtocol
from providers.netsafety import SockAddr, dial, resolve_destination, tls_context
from schemas.errors import MailError, ServiceUnavailable

T = TypeVar("T")


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
    return await _within(settings.timeout_s, _open(settings, answers, context))


async def _open(
    settings: ImapSettings, answers: list[tuple[int, SockAddr]], context: ssl.SSLContext
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
        await session.login(settings.username, settings.password)
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
