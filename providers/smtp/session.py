"""One SMTP connection up to an authenticated session: vetted dial, TLS, EHLO, AUTH PLAIN.

aiosmtplib's `SMTP` class resolves and dials the host itself and hides the end-of-data marker
inside `data()`, so we drive its lower layer, `SMTPProtocol`, over a socket we dialled at a
vetted numeric address. Every failure here closes the connection and raises
`NotSent` with the stage it happened in; nothing in this module can write the end-of-data marker.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl

from aiosmtplib import SMTPException, SMTPResponse, SMTPResponseException
from aiosmtplib.esmtp import parse_esmtp_extensions
from aiosmtplib.protocol import SMTPProtocol

from providers.netsafety import SockAddr, dial, resolve_destination, tls_context
from providers.smtp.settings import SmtpSettings
from providers.smtp.wire import enhanced_status
from schemas.errors import MailError
from schemas.submission import NotSent, NotSentReason, SubmissionStage

EHLO_NAME = b"localhost"
SECURE_TLS_VERSIONS = frozenset({"TLSv1.2", "TLSv1.3"})


def reply_code(response: SMTPResponse) -> int:
    """The reply's code when it is a real SMTP code, else 0 (aiosmtplib uses -1 for garbage)."""
    return response.code if 200 <= response.code <= 599 else 0


class Channel:
    """A connected SMTP protocol whose commands all run under the pre-terminator deadline."""

    def __init__(self, protocol: SMTPProtocol, timeout_s: float) -> None:
        self.protocol = protocol
        self.timeout_s = timeout_s
        self.extensions: dict[str, str] = {}
        self.auth_mechanisms: list[str] = []

    async def command(
        self, *args: bytes, stage: SubmissionStage, reason: NotSentReason, expect: tuple[int, ...]
    ) -> SMTPResponse:
        """Send one command and return its reply; anything but `expect` raises NotSent."""
        try:
            response = await self.protocol.execute_command(*args, timeout=self.timeout_s)
        except (SMTPException, OSError, ValueError):
            raise NotSent(stage, reason) from None
        if response.code not in expect:
            code = reply_code(response)
            raise NotSent(stage, reason, code, enhanced_status(code, response.message)) from None
        return response

    async def ehlo(self) -> None:
        """Send EHLO and remember the extensions and AUTH mechanisms it advertises."""
        response = await self.command(
            b"EHLO", EHLO_NAME, stage="connection", reason="connect_failed", expect=(250,)
        )
        self.extensions, self.auth_mechanisms = parse_esmtp_extensions(response.message)

    def is_tls_complete(self) -> bool:
        """Tell whether the channel runs over a finished TLS 1.2+ handshake."""
        transport = self.protocol.transport
        ssl_object = None if transport is None else transport.get_extra_info("ssl_object")
        return ssl_object is not None and ssl_object.version() in SECURE_TLS_VERSIONS

    def abort(self) -> None:
        """Drop the connection at once, discarding anything not yet written; never raises."""
        transport = self.protocol.transport
        if isinstance(transport, asyncio.Transport):
            transport.abort()


async def open_session(settings: SmtpSettings) -> Channel:
    """Connect, secure, greet and authenticate; any failure is NotSent and leaves nothing open."""
    try:
        context = tls_context(settings.ca_file)
    except (OSError, ssl.SSLError):
        raise NotSent("connection", "tls_failed", network_contacted=False) from None
    try:
        async with asyncio.timeout(settings.timeout_s):
            answers = await resolve_destination(
                settings.host, settings.port, allow_private_hosts=settings.allow_private_hosts
            )
    except (MailError, TimeoutError):
        raise NotSent("connection", "connect_failed", network_contacted=False) from None
    sock = await _dial(answers, settings.timeout_s)
    channel = await _attach(sock, settings, context)
    try:
        await _secure(channel, settings, context)
        await _authenticate(channel, settings)
    except BaseException:
        channel.abort()
        raise
    return channel


async def _dial(answers: list[tuple[int, SockAddr]], timeout_s: float) -> socket.socket:
    sock = None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            sock = await dial(answers)
    if sock is None:  # no connection was ever established: nothing reached the server
        raise NotSent("connection", "connect_failed", network_contacted=False)
    return sock


async def _attach(sock: socket.socket, settings: SmtpSettings, ctx: ssl.SSLContext) -> Channel:
    """Wrap the dialled socket (in TLS for implicit-TLS mode) and read the 220 greeting."""
    loop = asyncio.get_running_loop()
    protocol = SMTPProtocol(loop=loop)
    implicit = settings.tls_mode == "tls"
    try:
        async with asyncio.timeout(settings.timeout_s):
            await loop.create_connection(
                lambda: protocol,
                sock=sock,
                ssl=ctx if implicit else None,
                server_hostname=settings.host if implicit else None,
                ssl_handshake_timeout=settings.timeout_s if implicit else None,
            )
    except (OSError, TimeoutError):  # ssl.SSLError is an OSError
        sock.close()
        raise NotSent("connection", "tls_failed" if implicit else "connect_failed") from None
    except BaseException:
        sock.close()
        raise
    channel = Channel(protocol, settings.timeout_s)
    try:
        greeting = await protocol.read_response(timeout=settings.timeout_s)
    except (SMTPException, OSError):
        channel.abort()
        raise NotSent("connection", "connect_failed") from None
    except BaseException:
        channel.abort()
        raise
    if greeting.code != 220:
        channel.abort()
        code = reply_code(greeting)
        raise NotSent("connection", "connect_failed", code, enhanced_status(code, greeting.message))
    return channel


async def _secure(channel: Channel, settings: SmtpSettings, context: ssl.SSLContext) -> None:
    """EHLO; in STARTTLS mode upgrade (mandatory) and EHLO again; then require finished TLS."""
    await channel.ehlo()
    if settings.tls_mode == "starttls":
        if "starttls" not in channel.extensions:
            raise NotSent("connection", "starttls_unavailable")
        try:
            await channel.protocol.start_tls(
                context, server_hostname=settings.host, timeout=settings.timeout_s
            )
        except SMTPResponseException as exc:
            code = exc.code if 200 <= exc.code <= 599 else 0
            raise NotSent("connection", "starttls_unavailable", code) from None
        except (SMTPException, OSError):  # timeouts, resets, ssl.SSLError
            raise NotSent("connection", "tls_failed") from None
        # RFC 3207 §4.2: forget everything learnt before TLS and ask again.
        await channel.ehlo()
    if not channel.is_tls_complete():
        raise NotSent("connection", "tls_failed")


async def _authenticate(channel: Channel, settings: SmtpSettings) -> None:
    """AUTH PLAIN, refused before any credential leaves when the server does not offer it."""
    if "plain" not in channel.auth_mechanisms:
        raise NotSent("authentication", "auth_unavailable")
    token = _plain_token(settings)
    if token is None:
        raise NotSent("authentication", "auth_failed")
    await channel.command(
        b"AUTH",
        b"PLAIN",
        token,
        stage="authentication",
        reason="auth_failed",
        expect=(235,),
    )


def _plain_token(settings: SmtpSettings) -> bytes | None:
    # A UnicodeEncodeError keeps the whole string it failed on: never let it escape.
    try:
        password = settings.password.reveal().encode()
        username = settings.username.encode()
    except UnicodeError:
        return None
    return base64.b64encode(b"\0" + username + b"\0" + password)
