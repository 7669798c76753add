"""Typed errors every room raises; the service maps them to the wire error object.

The class says what the caller may conclude; `code` is the stable `error_code` that
docs/tools.md lists under Errors.
Messages are ours alone: never credentials, provider response text or message content.
"""

from __future__ import annotations

from typing import ClassVar


class MailError(Exception):
    """Base of every classified failure; `outcome` carries a partial outcome."""

    code: ClassVar[str] = "operation_failed"
    default_message: ClassVar[str] = "the operation failed"

    outcome: object | None

    def __init__(self, message: str | None = None, *, outcome: object | None = None) -> None:
        super().__init__(message or self.default_message)
        self.outcome = outcome

    @property
    def message(self) -> str:
        """Return the human-readable cause."""
        return str(self.args[0]) if self.args else self.default_message


class InvalidArguments(MailError):
    """The request is malformed; nothing touched the mailbox, store or SMTP."""

    code = "invalid_arguments"
    default_message = "invalid request"


class StaleReference(MailError):
    """The reference's UIDVALIDITY no longer matches the live folder."""

    code = "stale_reference"
    default_message = "UIDVALIDITY changed; search again"


class Conflict(MailError):
    """The message changed concurrently (CONDSTORE/MODIFIED); nothing was applied."""

    code = "conflict"
    default_message = "message changed concurrently; read it again before changing flags"


class DraftConflict(Conflict):
    """The draft source changed since it was read; the original was not changed."""

    default_message = "the draft source changed; read the draft again before revising or preparing"


class NotFound(MailError):
    """The message (or attachment) is not there any more."""

    code = "not_found"
    default_message = "message not found"


class UnsupportedOperation(MailError):
    """The server or provider cannot do this safely."""

    code = "unsupported_operation"
    default_message = "operation not safely supported"


class SafetyLimit(MailError):
    """A size or count limit was hit; narrow the request."""

    code = "safety_limit"
    default_message = "server response exceeded safety limits"


class ServiceUnavailable(MailError):
    """Connecting, TLS, login or a command failed with a definite answer or none at all."""

    code = "service_unavailable"
    default_message = "mail service unavailable or authentication failed"


class OutcomeUnknown(MailError):
    """A mutation was sent but its reply was lost: it may have happened."""

    code = "outcome_unknown"
    default_message = "the change may have succeeded; verify before retrying"


class DeadlineExceeded(MailError, TimeoutError):
    """The per-call deadline expired (also a TimeoutError)."""

    code = "deadline_exceeded"
    default_message = "the call deadline expired"


class DeploymentDisabled(MailError):
    """The operator's gates or missing store forbid this operation."""

    code = "deployment_disabled"
    default_message = "this capability is disabled by the operator"


class InsufficientScope(MailError):
    """The caller lacks scopes the request needs beyond `mail.read` (`required`, in order)."""

    code = "insufficient_scope"
    default_message = "insufficient OAuth scope"

    def __init__(
        self, *required: str, message: str | None = None, outcome: object | None = None
    ) -> None:
        if not required:
            raise ValueError("name at least one required scope")
        super().__init__(message, outcome=outcome)
        self.required = required


class OperationFailed(MailError):
    """An unclassified failure; inspect any partial outcome."""

    code = "operation_failed"
    default_message = "the operation failed"


class RecipientNotAllowed(InvalidArguments):
    """A recipient is not on the owner's allowlist; nothing was prepared, sent or consumed."""

    code = "recipient_not_allowed"
    default_message = "a recipient is not on the allowlist"


class ApprovalUnavailable(MailError):
    """The preparation needs a person's approval that this connection cannot ask for."""

    code = "approval_unavailable"
    default_message = "this send needs a person's approval, which this client cannot ask for"


class ApprovalNeeded(ApprovalUnavailable):
    """The preparation waits for a person's approval; the service asks, then confirms again.

    Raised before anything is claimed; should it reach a caller, it reads as unavailable.
    """

    default_message = (
        "this preparation requires a person's approval, and none is recorded; nothing was sent"
    )


class ApprovalDeclined(MailError):
    """The person did not approve (or the answer was no valid approval); nothing was sent."""

    code = "approval_declined"
    default_message = "the send was not approved; nothing was sent"


class RateLimited(MailError):
    """The owner's send rate limit is reached; nothing was consumed or sent."""

    code = "rate_limited"
    default_message = "the send rate limit is reached; nothing was sent"
