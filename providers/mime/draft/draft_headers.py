"""Strict header rules of the structured-draft subset.

Every refusal raises DraftUnsupported with the reason; nothing here is lenient, because a draft
that is read back must rebuild to the same content or not be offered for editing at all.
"""

from __future__ import annotations

import re

from providers.mime.compose.addresses import Mailbox, parse_source_list
from providers.mime.compose.dates import parse_source_date
from providers.mime.compose.text_rules import normalize_message_id
from providers.mime.encoded_words import WordError, decode_words
from providers.mime.header_block import HeaderRefused, UnknownField, strict_fields
from providers.mime.read.headers import parse_addresses
from schemas.errors import UnsupportedOperation

OUTER_FIELDS = frozenset(
    {
        "from",
        "to",
        "cc",
        "bcc",
        "subject",
        "date",
        "message-id",
        "in-reply-to",
        "references",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
        "content-disposition",
    }
)
PART_FIELDS = frozenset({"content-type", "content-transfer-encoding", "content-disposition"})

_HEADER_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class DraftUnsupported(UnsupportedOperation):
    """The draft is outside the supported structured MIME subset."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the draft is outside the supported structured MIME subset: {reason}")


Fields = dict[str, str]


def header_block(raw: bytes, start: int, end: int, allowed: frozenset[str]) -> tuple[Fields, int]:
    """Read the strict header block of the entity raw[start:end]; return fields and body start.

    Field names are lower-cased; each allowed field may appear once; values are unfolded,
    trimmed of surrounding blanks, free of control characters and valid UTF-8.
    """
    try:
        found, body_start = strict_fields(raw, start, end, allowed)
    except UnknownField:
        raise DraftUnsupported(_unknown_field(allowed)) from None
    except HeaderRefused as refused:
        raise DraftUnsupported(str(refused)) from None
    fields: Fields = {}
    for name, value in found.items():
        if _HEADER_CONTROL.search(value):
            raise DraftUnsupported("header fields must not contain control characters")
        try:
            fields[name] = value.decode("utf-8")
        except UnicodeDecodeError:
            raise DraftUnsupported("header fields must be ASCII or valid UTF-8") from None
    return fields, body_start


def _unknown_field(allowed: frozenset[str]) -> str:
    if allowed is PART_FIELDS:
        return "a MIME part has a header field other than the Content-* fields"
    return (
        "a header field other than From, To, Cc, Bcc, Subject, Date, Message-Id, In-Reply-To, "
        "References, MIME-Version and the Content-* fields is present"
    )


def single_mailbox(value: str) -> Mailbox:
    """The From field: exactly one usable mailbox."""
    found = mailbox_list(value, "From")
    if len(found) != 1:
        raise DraftUnsupported("From must hold exactly one valid address")
    return found[0]


def mailbox_list(value: str, name: str) -> list[Mailbox]:
    """An address field whose every entry passes the outbound address rules.

    The stdlib parser validates; display names come from our RFC 2047 reader, because the
    stdlib puts a space between adjacent encoded words, which would change a long name.
    """
    checked = parse_source_list(value)
    if checked is None:
        raise DraftUnsupported(f"{name} holds an address that cannot be used for sending")
    named = parse_addresses(value)
    if [entry.address for entry in named] != [mailbox.address for mailbox in checked]:
        raise DraftUnsupported(f"{name} holds an address list that cannot be read exactly")
    return [
        Mailbox(" ".join(entry.name.split()), mailbox.address)
        for entry, mailbox in zip(named, checked, strict=True)
    ]


def message_id(value: str, name: str) -> str:
    """One valid Message-ID, bracketed."""
    normalized = normalize_message_id(value)
    if normalized is None:
        raise DraftUnsupported(f"{name} must be one valid Message-ID")
    return normalized


def reference_chain(value: str) -> list[str]:
    """References: whitespace-separated valid Message-IDs."""
    return [message_id(token, "every References entry") for token in value.split()]


def check_date(value: str) -> None:
    """Refuse a Date the composition reader could not parse."""
    if parse_source_date(value) is None:
        raise DraftUnsupported("Date is present but not a valid RFC 5322 date")


def check_mime_version(value: str) -> None:
    """Only MIME-Version 1.0 is understood."""
    if value != "1.0":
        raise DraftUnsupported("MIME-Version must be 1.0")


def decode_subject(value: str) -> str:
    """Decode RFC 2047 words strictly: known charset, exact B or Q payload, no bad bytes."""
    try:
        return decode_words(value, strict=True)
    except WordError as error:
        raise DraftUnsupported(f"Subject {error}") from None
