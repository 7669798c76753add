"""One SMTP connection up to an authenticated session: vetted dial, TLS, EHLO, AUTH.

aiosmtplib's `SMTP` class resolves and dials the host itself and hides the end-of-data marker
inside `data()`, so we drive its lower layer, `SMTPProtocol`, over a socket we dialled at a
vetted numeric address. Every failure here closes the connection and raises
`NotSent` with the stage it happened in; nothing in this module can write the end-of-data marker.

AUTH is PLAIN with the configured password, or XOAUTH2 with a token from the settings'
`TokenSource`. A refused token is invalidated; when it was a cached copy, a refreshed one gets
one more login on a fresh connection, still before any envelope command.
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
from providers.oauth2.source import AccessToken, TokenSource, xoauth2_initial_response
from providers.smtp.settings import SmtpSettings
from providers.smtp.wire import enhanced_status
from schemas.errors import MailError
from schemas.secret import Secret
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


class _TokenRefused(Exception):
    """The server refused an XOAUTH2 token (a 5xx to AUTH); carries the NotSent to report."""

    def __init__(self, token: AccessToken, not_sent: NotSent) -> None:
        super().__init__("the SMTP server refused the access token")
        self.token = token
        self.not_sent = not_sent


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
    try:
        return await _login(answers, settings, context)
    except _TokenRefused as refused:
        if refused.token.fresh:  # fetched for this login: a refreshed one would fare no better
            raise refused.not_sent from None
    # A cached token was refused (it may have expired or been revoked since it was cached):
    # one more login with a refreshed token, on a fresh connection. Neither connection got
    # an envelope command, so the message has not left: this is a second login, not a resend.
    try:
        return await _login(answers, settings, context)
    except _TokenRefused as refused:
        raise refused.not_sent from None


async def _login(
    answers: list[tuple[int, SockAddr]], settings: SmtpSettings, context: ssl.SSLContext
) -> Channel:
    """Dial, secure and authenticate one connection; on any failure it is closed."""
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
    """AUTH PLAIN or XOAUTH2, refused before any credential leaves when it is not offered."""
    if settings.tokens is not None:
        await _authenticate_xoauth2(channel, settings.username, settings.tokens)
        return
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


async def _authenticate_xoauth2(channel: Channel, username: str, tokens: TokenSource) -> None:
    """AUTH XOAUTH2; a refusal (5xx, or a challenge) invalidates the token: _TokenRefused."""
    if "xoauth2" not in channel.auth_mechanisms:  # checked before a token is even fetched
        raise NotSent("authentication", "auth_unavailable")
    try:
        token = await tokens.token()
    except MailError:  # no token to be had: the login failed before anything left
        raise NotSent("authentication", "auth_failed") from None
    response = _xoauth2_response(username, token.value)
    if response is None:
        raise NotSent("authentication", "auth_failed")
    try:
        reply = await channel.command(
            b"AUTH",
            b"XOAUTH2",
            response,
            stage="authentication",
            reason="auth_failed",
            expect=(235, 334),
        )
    except NotSent as failed:
        if 500 <= failed.reply_code <= 599:  # a 4xx is the server's trouble, not the token's
            raise _refused(tokens, token, failed) from None
        raise
    if reply.code == 334:
        # XOAUTH2 reports a refusal as a challenge (base64 JSON) and waits for the client:
        # answer once with an empty line, then the server sends its final error. The challenge
        # is the refusal, whatever that final reply is (or if it never comes).
        try:
            await channel.command(b"", stage="authentication", reason="auth_failed", expect=())
        except NotSent as failed:
            raise _refused(tokens, token, failed) from None


def _refused(tokens: TokenSource, token: AccessToken, failed: NotSent) -> _TokenRefused:
    """Invalidate the refused token's generation; the error to raise for it."""
    tokens.invalidate(token.generation)
    return _TokenRefused(token, failed)


def _xoauth2_response(username: str, token: Secret) -> bytes | None:
    # A UnicodeEncodeError keeps the whole string it failed on: never let it escape.
    try:
        return base64.b64encode(xoauth2_initial_response(username, token))
    except UnicodeError:
        return None


def _plain_token(settings: SmtpSettings) -> bytes | None:
    # A UnicodeEncodeError keeps the whole string it failed on: never let it escape.
    try:
        password = settings.password.reveal().encode()
        username = settings.username.encode()
    except UnicodeError:
        return None
    return base64.b64encode(b"\0" + username + b"\0" + password)
