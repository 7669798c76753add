"""Typed errors every room raises; the service maps them to the wire error object (tools.md §6).

The class says what the caller may conclude; `code` is the stable `error_code` of tools.md §6.2.
Messages are ours alone: never credentials, provider response text or message content.
"""

from __future__ import annotations

from typing import ClassVar


class MailError(Exception):
    """Base of every classified failure; `outcome` carries a partial outcome (tools.md §6.5)."""

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
    code = "invalid_arguments"
    default_message = "invalid request"


class StaleReference(MailError):
    code = "stale_reference"
    default_message = "UIDVALIDITY changed; search again"


class Conflict(MailError):
    code = "conflict"
    default_message = "message changed concurrently; read it again before changing flags"


class DraftConflict(Conflict):
    default_message = "the draft source changed; read the draft again before revising or preparing"


class NotFound(MailError):
    code = "not_found"
    default_message = "message not found"


class UnsupportedOperation(MailError):
    code = "unsupported_operation"
    default_message = "operation not safely supported"


class SafetyLimit(MailError):
    code = "safety_limit"
    default_message = "server response exceeded safety limits"


class ServiceUnavailable(MailError):
    code = "service_unavailable"
    default_message = "mail service unavailable or authentication failed"


class OutcomeUnknown(MailError):
    code = "outcome_unknown"
    default_message = "the change may have succeeded; verify before retrying"


class DeadlineExceeded(MailError, TimeoutError):
    code = "deadline_exceeded"
    default_message = "the call deadline expired"


class Canceled(MailError):
    code = "canceled"
    default_message = "the request was cancelled"


class DeploymentDisabled(MailError):
    code = "deployment_disabled"
    default_message = "this capability is disabled by the operator"


class InsufficientScope(MailError):
    code = "insufficient_scope"
    default_message = "insufficient OAuth scope"

    def __init__(
        self, required_scope: str, message: str | None = None, *, outcome: object | None = None
    ) -> None:
        super().__init__(message, outcome=outcome)
        self.required_scope = required_scope


class OperationFailed(MailError):
    code = "operation_failed"
    default_message = "the operation failed"
