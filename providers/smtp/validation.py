"""The transport-side checks run before any connection."""

from __future__ import annotations

import email.parser
import email.policy
from email import errors as email_errors

from providers.smtp.wire import is_bare_mailbox
from schemas.submission import Envelope, NotSent

MAX_RECIPIENTS = 100
MAX_RAW_BYTES = 5 * 1024 * 1024

# Defects that mean the header section is not a sequence of well-formed fields.
_HEADER_DEFECTS = (
    email_errors.MissingHeaderBodySeparatorDefect,
    email_errors.FirstHeaderLineIsContinuationDefect,
)
# A Resent-Bcc leaks hidden recipients exactly like Bcc does, so it is refused too.
_HIDDEN_RECIPIENT_HEADERS = frozenset({"bcc", "resent-bcc"})


def validate_submission(envelope: Envelope, raw: bytes, sender: str) -> None:
    """Raise NotSent("validation", "local_validation") unless the submission may go out."""
    if not envelope_is_valid(envelope, sender) or not message_is_valid(raw, sender):
        raise NotSent("validation", "local_validation", network_contacted=False)


def envelope_is_valid(envelope: Envelope, sender: str) -> bool:
    """Tell whether the envelope names the configured sender and 1-100 bare recipients."""
    if envelope.mail_from != sender or not is_bare_mailbox(envelope.mail_from):
        return False
    if not 1 <= len(envelope.recipients) <= MAX_RECIPIENTS:
        return False
    return all(is_bare_mailbox(r) for r in envelope.recipients)


def message_is_valid(raw: bytes, sender: str) -> bool:
    """Tell whether raw is 1 byte-5 MiB, parses, has no Bcc and its From is the sender."""
    if not 1 <= len(raw) <= MAX_RAW_BYTES:
        return False
    parser = email.parser.BytesParser(policy=email.policy.default)
    try:
        message = parser.parsebytes(raw, headersonly=True)
    except (ValueError, TypeError, LookupError):
        return False
    if any(isinstance(d, _HEADER_DEFECTS) for d in message.defects):
        return False
    names = [name.lower() for name in message]  # header names, in order
    if not names or _HIDDEN_RECIPIENT_HEADERS.intersection(names):
        return False
    if names.count("from") != 1:
        return False
    try:
        addresses = message["From"].addresses
    except (AttributeError, ValueError, TypeError, IndexError):
        return False
    return len(addresses) == 1 and same_mailbox(addresses[0].addr_spec, sender)


def same_mailbox(a: str, b: str) -> bool:
    """Compare two mailboxes: local parts exactly, domains ASCII case-insensitively."""
    local_a, _, domain_a = a.rpartition("@")
    local_b, _, domain_b = b.rpartition("@")
    return bool(local_a) and local_a == local_b and domain_a.lower() == domain_b.lower()
