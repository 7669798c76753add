"""SMTP submission that can stop before the final dot; the ledger drives it as a Submitter."""

from providers.smtp.pool import DEFAULT_MAX_CONNECTIONS, SmtpPool
from providers.smtp.settings import SmtpSettings
from providers.smtp.submitter import SmtpSubmission, SmtpSubmitter
from providers.smtp.validation import validate_submission
from providers.smtp.wire import dot_stuff

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "SmtpPool",
    "SmtpSettings",
    "SmtpSubmission",
    "SmtpSubmitter",
    "dot_stuff",
    "validate_submission",
]
