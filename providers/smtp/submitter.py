"""SMTP submission that can stop before the final dot.

`SmtpSubmitter.begin` does everything up to the end-of-data marker — connect, TLS, EHLO, AUTH,
MAIL, every RCPT, DATA and the dot-stuffed body — and then waits. Only `SmtpSubmission.commit`
writes `.<CRLF>`; `abort` drops the connection instead, and RFC 5321 §4.1.1.4 then requires the
server to discard the transaction. So until `commit` runs, the message is provably not submitted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Literal

from aiosmtplib import (
    SMTPException,
    SMTPReadTimeoutError,
    SMTPResponse,
    SMTPServerDisconnected,
    SMTPTimeoutError,
)

from providers.smtp.session import Channel, open_session, reply_code
from providers.smtp.settings import TLS_MODES, SmtpSettings
from providers.smtp.validation import MAX_RAW_BYTES, MAX_RECIPIENTS
from providers.smtp.wire import (
    enhanced_status,
    is_bare_mailbox,
    normalize_line_endings,
    stuff_dots,
)
from schemas.submission import Envelope, FinalReply, MaybeSent, NotSent, SmtpEndpoint

END_OF_DATA = b".\r\n"
QUIT_TIMEOUT_S = 5.0


class SmtpSubmitter:
    """Submits one message per `begin` over a fresh connection, closed after the outcome."""

    def __init__(self, settings: SmtpSettings) -> None:
        if settings.tls_mode not in TLS_MODES:
            raise ValueError("tls_mode must be 'tls' or 'starttls'")
        self._settings = settings

    @property
    def endpoint(self) -> SmtpEndpoint:
        """The configured destination, for the `smtp_attempt_started` event."""
        return self._settings.endpoint

    async def begin(self, envelope: Envelope, raw: bytes) -> SmtpSubmission:
        """Run every step before the end-of-data marker; NotSent on any failure."""
        check_submittable(envelope, raw)
        channel = await open_session(self._settings)
        return await transact(channel, envelope, raw, self._settings, quit_channel)


KeepChannel = Callable[[Channel], Awaitable[None]]


def check_submittable(envelope: Envelope, raw: bytes) -> None:
    """Refuse before any connection what must never reach the wire (NotSent, validation)."""
    if not _is_submittable(envelope, raw):
        # Defence in depth: addresses go verbatim into commands, so check them even if
        # the caller skipped validate_submission.
        raise NotSent("validation", "local_validation", network_contacted=False)


async def transact(
    channel: Channel, envelope: Envelope, raw: bytes, settings: SmtpSettings, keep: KeepChannel
) -> SmtpSubmission:
    """On an authenticated session: MAIL, RCPT, DATA and the body, then stop before the dot.

    Any failure drops the connection and raises NotSent; `keep` receives the channel once a
    later commit ends in acceptance (the session is then clean for another transaction).
    """
    try:
        text = normalize_line_endings(raw)
        body = stuff_dots(text)
        await _send_envelope(channel, envelope, len(text))
        await channel.command(b"DATA", stage="data", reason="data_refused", expect=(354,))
        await _send_body(channel, body)
    except BaseException:
        channel.abort()
        raise
    return SmtpSubmission(channel, len(body), settings.termination_timeout_s, keep)


async def quit_channel(channel: Channel) -> None:
    """QUIT best effort, then close: used when a session is not kept for another message."""
    with contextlib.suppress(SMTPException, OSError, ValueError):
        await channel.protocol.execute_command(b"QUIT", timeout=QUIT_TIMEOUT_S)
    channel.abort()


class SmtpSubmission:
    """A transaction whose body is on the wire without its end-of-data marker."""

    def __init__(
        self, channel: Channel, wire_bytes: int, termination_timeout_s: float, keep: KeepChannel
    ) -> None:
        self._channel = channel
        self._termination_timeout_s = termination_timeout_s
        self._keep = keep
        self._state = "open"  # open -> committed | aborted
        self.wire_bytes = wire_bytes  # dot-stuffed body bytes written, marker excluded

    @property
    def stage(self) -> Literal["acknowledgement"]:
        """The reply to the end-of-data marker is where an SMTP submission is decided."""
        return "acknowledgement"

    async def commit(self) -> FinalReply:
        """Write the end-of-data marker once and classify the final reply; never retries."""
        if self._state != "open":
            raise RuntimeError(f"this submission is already {self._state}")
        self._state = "committed"
        protocol = self._channel.protocol
        try:
            protocol.write(END_OF_DATA)
        except (SMTPException, OSError):
            # The connection was gone before the marker could leave: still provably not sent.
            self._channel.abort()
            raise NotSent("data", "body_write_failed") from None
        try:
            response = await protocol.read_response(timeout=self._termination_timeout_s)
        except SMTPReadTimeoutError:
            self._channel.abort()
            raise MaybeSent("acknowledgement", "final_reply_timeout") from None
        except (SMTPServerDisconnected, SMTPTimeoutError, OSError):
            self._channel.abort()
            raise MaybeSent("acknowledgement", "connection_lost") from None
        except SMTPException:  # unparseable or oversized reply
            self._channel.abort()
            raise MaybeSent("acknowledgement", "malformed_reply") from None
        except BaseException:
            self._channel.abort()  # cancelled after the marker left: the outcome is unknown
            raise
        return await self._conclude(response)

    async def abort(self) -> None:
        """Drop the connection without the end-of-data marker; idempotent, never raises."""
        if self._state == "open":
            self._state = "aborted"
        with contextlib.suppress(Exception):
            self._channel.abort()

    async def _conclude(self, response: SMTPResponse) -> FinalReply:
        code = reply_code(response)
        status = enhanced_status(code, response.message)
        if 200 <= code <= 299:
            # The outcome is decided: whatever happens to the session now changes nothing.
            await self._keep(self._channel)
            return FinalReply(code=code, enhanced_status=status)
        if 400 <= code <= 599:
            # Only sessions whose last transaction was accepted are ever kept for another.
            await quit_channel(self._channel)
            raise NotSent("acknowledgement", "final_reply_negative", code, status)
        self._channel.abort()
        raise MaybeSent("acknowledgement", "malformed_reply")


def _is_submittable(envelope: Envelope, raw: bytes) -> bool:
    if not 1 <= len(raw) <= MAX_RAW_BYTES or not 1 <= len(envelope.recipients) <= MAX_RECIPIENTS:
        return False
    return all(is_bare_mailbox(a) for a in (envelope.mail_from, *envelope.recipients))


async def _send_envelope(channel: Channel, envelope: Envelope, size: int) -> None:
    """MAIL FROM (with SIZE when offered), then every RCPT; the first refusal ends it all."""
    options = [b"SIZE=%d" % size] if "size" in channel.extensions else []
    await channel.command(
        b"MAIL",
        b"FROM:<" + envelope.mail_from.encode("ascii") + b">",
        *options,
        stage="envelope",
        reason="sender_refused",
        expect=(250,),
    )
    for recipient in envelope.recipients:
        await channel.command(
            b"RCPT",
            b"TO:<" + recipient.encode("ascii") + b">",
            stage="envelope",
            reason="recipient_refused",
            expect=(250, 251),
        )


async def _send_body(channel: Channel, body: bytes) -> None:
    """Write the dot-stuffed body and wait until the transport has handed it on."""
    protocol = channel.protocol
    try:
        async with asyncio.timeout(channel.timeout_s):
            protocol.write(body)
            # aiosmtplib's protocol carries asyncio's stream flow control; waiting on it means
            # a dead connection shows up here (stage data) rather than after the commit point.
            await protocol._drain_helper()
    except (SMTPException, OSError, TimeoutError):
        raise NotSent("data", "body_write_failed") from None
