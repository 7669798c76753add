"""What the dispatcher needs from the mailbox side: a local validator, a submission that stops
before the final dot, and a filer of the Sent copy.

The dispatcher is written against these protocols, never against aiosmtplib; the service hands
it a Submitter built by providers.smtp. The split between `begin` and `commit` is the commit
point: `smtp_commit_point` is made durable between the two calls. Connections are a bounded
resource: a dispatch first waits for a slot, and only then records its attempt marker.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from schemas.ledger_events import SentFilingFailed, SentFilingSucceeded
from schemas.submission import Envelope, FinalReply, FinalStage, SmtpEndpoint


class Submission(Protocol):
    """One submission ready for its final request: an SMTP body on the wire without its
    terminator, or a checked Graph login with the send request not yet made."""

    @property
    def stage(self) -> FinalStage:
        """The stage of the final request: "acknowledgement" (SMTP) or "graph_submission"."""
        ...

    @property
    def wire_bytes(self) -> int:
        """The dot-stuffed body bytes written, the end-of-data marker excluded."""
        ...

    async def commit(self) -> FinalReply:
        """Write CRLF.CRLF and await the final reply under the DATA-termination timeout.

        Raises NotSent(stage="acknowledgement", reason="final_reply_negative", ...) on an
        explicit 4xx/5xx, or MaybeSent(...) when no definite reply arrives.
        """
        ...

    async def abort(self) -> None:
        """Close the connection WITHOUT the terminator, so nothing is submitted; never raises."""
        ...


class Slot(Protocol):
    """The right to use one connection; submissions begun here end before the slot does."""

    async def begin(self, envelope: Envelope, raw: bytes) -> Submission:
        """Connect (or reuse a session), MAIL, every RCPT, DATA 354 and the dot-stuffed body.

        Stops before the terminator. Raises NotSent(stage in connection | authentication |
        envelope | data, reason, ...) when any step fails; nothing is then submitted.
        """
        ...


class Submitter(Protocol):
    """A configured transport with a bounded number of connections."""

    @property
    def endpoint(self) -> SmtpEndpoint:
        """Return the configured endpoint recorded in `smtp_attempt_started`."""
        ...

    @property
    def capacity(self) -> int:
        """How many submissions may hold a connection at once."""
        ...

    @property
    def waiting(self) -> int:
        """How many submissions wait for a slot right now."""
        ...

    def busy(self) -> bool:
        """Tell whether a new submission would have to wait for a slot."""
        ...

    def slot(self) -> AbstractAsyncContextManager[Slot]:
        """Wait for a free slot (never failing for lack of one) and hold it for the block."""
        ...

    async def aclose(self) -> None:
        """Close the connections kept for later messages (shutdown)."""
        ...


class SentFiler(Protocol):
    """Files the Sent copy after acceptance (an IMAP APPEND); answers, never raises."""

    async def file_sent(self, raw: bytes) -> SentFilingSucceeded | SentFilingFailed:
        """APPEND raw to the unique Sent folder with \\Seen and report what happened."""
        ...


class Validator(Protocol):
    """Checks a submission locally before any connection ."""

    def __call__(self, envelope: Envelope, raw: bytes) -> None:
        """Raise NotSent(stage "validation") when the message must not be submitted."""
        ...
