"""The composition headers of a reply or forward source, read from its complete header block.

Only Subject is RFC 2047 decoded as text; address and ID fields keep their structure.
"""

from __future__ import annotations

from datetime import datetime

from msgspec import Struct, field

from providers.mime.charsets import loose_text
from providers.mime.compose import limits
from providers.mime.compose.addresses import Mailbox, parse_source_list, readable
from providers.mime.compose.dates import parse_source_date
from providers.mime.compose.text_rules import clean_source_subject
from providers.mime.encoded_words import decode_words
from providers.mime.header_block import parse_header_block
from schemas.compose import SourceMessage
from schemas.errors import OperationFailed

COMPOSITION_HEADERS = (
    "From",
    "Reply-To",
    "To",
    "Cc",
    "Message-Id",
    "In-Reply-To",
    "References",
    "Date",
    "Subject",
)


class AddressField(Struct, frozen=True):
    """A source address header: its mailboxes, or `invalid` with the cleaned raw value kept."""

    mailboxes: list[Mailbox] = field(default_factory=list)
    invalid: bool = False
    raw: str = ""

    def readable(self) -> str:
        """Format for a quotation: `Name <a>, b` or the cleaned raw value when invalid."""
        if self.invalid:
            return self.raw
        return ", ".join(readable(m) for m in self.mailboxes)


class SourceHeaders(Struct, frozen=True):
    """Everything composition reads from a source header block, plus malformed-field notes."""

    from_: AddressField
    reply_to: AddressField
    to: AddressField
    cc: AddressField
    message_id: str | None  # raw value; None when absent
    in_reply_to: str | None
    references: str | None
    date: datetime | None
    subject: str
    warnings: list[str]


def read_source_headers(source: SourceMessage) -> SourceHeaders:
    """Read the nine composition headers; duplicated or unsafe ones fail the preparation."""
    fields = parse_header_block(source.raw)
    values: dict[str, str] = {}
    for name in COMPOSITION_HEADERS:
        found = fields.get_all(name)
        if len(found) > 1:
            raise OperationFailed(
                f"the source message has more than one {name} header; prepare a new message instead"
            )
        if not found:
            continue
        raw = found[0]
        if len(raw) > limits.MAX_SOURCE_HEADER_VALUE_BYTES or any(b in raw for b in b"\r\n\x00"):
            raise OperationFailed(
                f"the source {name} header is unusable (over 64 KiB or holds CR, LF or NUL); "
                "prepare a new message instead"
            )
        values[name] = loose_text(raw)
    warnings: list[str] = []
    addresses = {
        name: _address_field(name, values.get(name), warnings)
        for name in ("From", "Reply-To", "To", "Cc")
    }
    date_value = values.get("Date")
    return SourceHeaders(
        from_=addresses["From"],
        reply_to=addresses["Reply-To"],
        to=addresses["To"],
        cc=addresses["Cc"],
        message_id=values.get("Message-Id"),
        in_reply_to=values.get("In-Reply-To"),
        references=values.get("References"),
        date=parse_source_date(date_value) if date_value is not None else None,
        subject=clean_source_subject(decode_words(values.get("Subject", ""))),
        warnings=warnings,
    )


def _address_field(name: str, value: str | None, warnings: list[str]) -> AddressField:
    if value is None:
        return AddressField()
    mailboxes = parse_source_list(value)
    if mailboxes is None or (not mailboxes and name in ("From", "Reply-To")):
        warnings.append(f"the source {name} header is malformed and unusable for routing")
        return AddressField(invalid=True, raw=clean_source_subject(decode_words(value)))
    return AddressField(mailboxes=mailboxes)
