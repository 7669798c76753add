"""Sending through Graph under the ledger: `POST /me/sendMail` with the prepared MIME, once.

Why sendMail and not a draft sent later (`POST /me/messages`, then `POST …/{id}/send`): the
draft path makes a mailbox write before the commit point, and a dispatch stopped between the
two leaves a complete copy of an approved message in the owner's Drafts, where a person (or
another client) could send it by hand: a second send that the ledger can neither prevent nor
see. sendMail has exactly one request that can send, nothing before it that changes the
mailbox, and Microsoft files the sent message in Sent Items with the prepared Message-ID, which
is the handle evidence looks up either way.

Before the commit point a submission checks locally (`graph_submission_is_valid`) and then
checks `/me` (stage "authentication"); the send request is the commit point's request and is
never repeated: 202 is accepted (queued, not delivered), any 4xx provably not sent, and a 5xx,
any other status, an answer too large or a lost exchange `unknown`.
"""

from __future__ import annotations

import asyncio
import base64
import email.parser
import email.policy
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email import errors as email_errors
from typing import Final, Literal

from providers.graph.account import GraphSettings, check_identity
from providers.graph.http import ME, ExchangeLost, GraphHttp, Kind
from providers.mime.compose.limits import MAX_GRAPH_MESSAGE_BYTES
from providers.smtp.validation import envelope_is_valid, same_mailbox
from schemas.errors import MailError
from schemas.submission import Envelope, FinalReply, MaybeSent, NotSent, SmtpEndpoint

ENDPOINT: Final = SmtpEndpoint(
    host="graph.microsoft.com",
    port=443,
    tls_mode="https",
    auth="graph_oauth",
    transport="microsoft_graph",
)
_ONE_EACH: Final = ("from", "to", "cc", "bcc")
_HEADER_DEFECTS = (
    email_errors.MissingHeaderBodySeparatorDefect,
    email_errors.FirstHeaderLineIsContinuationDefect,
)


def validate_graph_submission(envelope: Envelope, raw: bytes, sender: str) -> None:
    """Raise NotSent("validation", "local_validation") unless Graph may be given this MIME."""
    if not graph_submission_is_valid(envelope, raw, sender):
        raise NotSent("validation", "local_validation", network_contacted=False)


def graph_submission_is_valid(envelope: Envelope, raw: bytes, sender: str) -> bool:
    """Tell whether Graph may be given this MIME: it derives recipients from the headers, so
    To + Cc + Bcc must be exactly the approved envelope (a lost Bcc is a different message)."""
    if not envelope_is_valid(envelope, sender) or not 1 <= len(raw) <= MAX_GRAPH_MESSAGE_BYTES:
        return False
    parser = email.parser.BytesParser(policy=email.policy.default)
    try:
        # Only the header section is parsed: the body of a 3 MiB message would cost the loop
        # tens of milliseconds for nothing.
        head, _, _ = raw.partition(b"\r\n\r\n")
        message = parser.parsebytes(head + b"\r\n\r\n", headersonly=True)
        if any(isinstance(d, _HEADER_DEFECTS) for d in message.defects):
            return False
        names = [name.lower() for name in message]
        if "sender" in names or any(name.startswith("resent-") for name in names):
            return False
        if names.count("from") != 1 or any(names.count(name) > 1 for name in _ONE_EACH):
            return False
        senders = message["From"].addresses
        mailboxes = [
            address.addr_spec
            for name in ("To", "Cc", "Bcc")
            if message[name] is not None
            for address in message[name].addresses
        ]
    except (AttributeError, ValueError, TypeError, IndexError, LookupError):
        return False
    if len(senders) != 1 or not same_mailbox(senders[0].addr_spec, sender):
        return False
    return Counter(m.lower() for m in mailboxes) == Counter(r.lower() for r in envelope.recipients)


class GraphSubmission:
    """A checked login with the one send request not made yet."""

    def __init__(self, http: GraphHttp, raw: bytes, timeout_s: float) -> None:
        self._http = http
        self._raw = raw
        self._timeout_s = timeout_s
        self._state = "open"  # open -> committed | aborted
        self.wire_bytes = len(raw)

    @property
    def stage(self) -> Literal["graph_submission"]:
        """Graph's send request is where a Graph submission is decided."""
        return "graph_submission"

    async def commit(self) -> FinalReply:
        """Make the send request once and classify its answer; never repeated."""
        if self._state != "open":
            raise RuntimeError(f"this submission is already {self._state}")
        self._state = "committed"
        body = base64.b64encode(self._raw)
        try:
            answer = await self._http.request(
                Kind.SEND, "POST", f"{ME}/sendMail", mime=body, limit=64 * 1024,
                timeout_s=self._timeout_s,
            )  # fmt: skip
        except ExchangeLost as lost:
            if not lost.connected:
                # The connection never opened (its own, never a pooled one): nothing left.
                raise NotSent(
                    "graph_submission", "connect_failed", network_contacted=False
                ) from None
            cause: Literal["final_reply_timeout", "transport_error"] = (
                "final_reply_timeout" if lost.cause == "timeout" else "transport_error"
            )
            raise MaybeSent("graph_submission", cause) from None
        if answer.status == 202 and not answer.cut:
            return FinalReply(code=202, enhanced_status="")
        if 400 <= answer.status < 500:
            raise NotSent("graph_submission", "http_4xx", reply_code=answer.status)
        if answer.status >= 500:
            raise MaybeSent("graph_submission", "http_5xx")
        raise MaybeSent("graph_submission", "http_unexpected_status")

    async def abort(self) -> None:
        """Nothing was sent and nothing is open: the send request is simply never made."""
        self._state = "aborted"


class GraphSlot:
    """The right to make one send: checks `/me` before the commit point."""

    def __init__(self, http: GraphHttp, settings: GraphSettings, timeout_s: float) -> None:
        self._http = http
        self._settings = settings
        self._timeout_s = timeout_s

    async def begin(self, envelope: Envelope, raw: bytes) -> GraphSubmission:
        """Check the identity (a failure is provably not sent) and hold the send request."""
        try:
            await check_identity(self._http, self._settings)
        except MailError:
            raise NotSent("authentication", "auth_failed") from None
        return GraphSubmission(self._http, raw, self._timeout_s)


class GraphSubmitter:
    """The Graph transport for the dispatcher: sends share the mailbox's four connections."""

    def __init__(
        self, http: GraphHttp, settings: GraphSettings, timeout_s: float, capacity: int = 2
    ) -> None:
        self._http = http
        self._settings = settings
        # The send request's own limit: the dispatcher leaves room for it before the deadline.
        self._timeout_s = timeout_s
        self._capacity = capacity
        self._busy = 0
        self._waiting = 0
        self._slots = asyncio.Semaphore(capacity)

    @property
    def endpoint(self) -> SmtpEndpoint:
        """Graph's endpoint as `smtp_attempt_started` records it."""
        return ENDPOINT

    @property
    def capacity(self) -> int:
        """How many sends may be in flight at once."""
        return self._capacity

    @property
    def waiting(self) -> int:
        """How many sends wait for a slot."""
        return self._waiting

    def busy(self) -> bool:
        """Tell whether a new send would wait."""
        return self._busy >= self._capacity

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[GraphSlot]:
        """Wait for a free slot and hold it for the block."""
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._busy += 1
        try:
            yield GraphSlot(self._http, self._settings, self._timeout_s)
        finally:
            self._busy -= 1
            self._slots.release()

    async def aclose(self) -> None:
        """Nothing of its own to close (the mailbox owns the connections)."""
