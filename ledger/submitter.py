"""What the dispatcher needs from a transport: a submission that stops before the final dot.

The dispatcher is written against these protocols, never against aiosmtplib; the service hands
it a Submitter built by providers.smtp. The split between `begin` and `commit` is the commit
point of spec/sending.md §8.8: `smtp_commit_point` is made durable between the two calls.
"""

from __future__ import annotations

from typing import Protocol

from schemas.submission import Envelope, FinalReply, SmtpEndpoint


class Submission(Protocol):
    """One open SMTP transaction whose body is on the wire without its terminator."""

    async def commit(self) -> FinalReply:
        """Write CRLF.CRLF and await the final reply under the DATA-termination timeout.

        Raises NotSent(stage="acknowledgement", reason="final_reply_negative", ...) on an
        explicit 4xx/5xx, or MaybeSent(...) when no definite reply arrives.
        """
        ...

    async def abort(self) -> None:
        """Close the connection WITHOUT the terminator, so nothing is submitted; never raises."""
        ...


class Submitter(Protocol):
    """A configured transport that can begin exactly one submission per call."""

    @property
    def endpoint(self) -> SmtpEndpoint:
        """Return the configured endpoint recorded in `smtp_attempt_started`."""
        ...

    async def begin(self, envelope: Envelope, raw: bytes) -> Submission:
        """Connect, TLS, EHLO, AUTH, MAIL, every RCPT, DATA 354, and the dot-stuffed body.

        Stops before the terminator. Raises NotSent(stage in connection | authentication |
        envelope | data, reason, ...) when any step fails; nothing is then submitted.
        """
        ...
