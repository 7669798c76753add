"""The canonical approval text (service/approval/text.py): what is shown and what is hashed."""

from __future__ import annotations

import hashlib

from schemas.ledger import PayloadAttachment, PreparedPayload
from service.approval.text import envelope_lines, expiry_text, shown_digest, visible


def payload(**changes: object) -> PreparedPayload:
    fields: dict[str, object] = {
        "pid": "0" * 32,
        "owner": "1" * 64,
        "transport": "smtp",
        "action": "new",
        "from_": "owner@example.com",
        "to": ("ann@example.org", "bob@example.org"),
        "cc": (),
        "bcc": ("cat@example.net",),
        "subject": "Quarterly <report>",
        "text": "body",
        "html": "",
        "attachments": (PayloadAttachment("a.pdf", "application/pdf", 1234, "2" * 64),),
        "message_id": "<m@example.com>",
        "created_ms": 1_700_000_000_000,
        "expires_ms": 1_700_000_900_999,
        "raw": b"raw",
        "recipients": (),
        "warnings": (),
        "digest": "abcdef0123456789" * 4,
    }
    fields.update(changes)
    return PreparedPayload(**fields)  # type: ignore[arg-type]


def test_lines_show_the_stored_envelope_in_order() -> None:
    assert envelope_lines(payload()) == [
        "From: owner@example.com",
        "To: ann@example.org",
        "To: bob@example.org",
        "Cc: (none)",
        "Bcc: cat@example.net",
        "Subject: Quarterly <report>",
        "Attachment: a.pdf (1234 bytes)",
        "Digest: abcdef01",
        "Expires: 2023-11-14 22:28:20 UTC",
    ]


def test_no_attachments_and_no_body_in_the_text() -> None:
    lines = envelope_lines(payload(attachments=(), text="SECRET BODY"))
    assert "Attachments: none" in lines
    assert not any("SECRET" in line for line in lines)


def test_hidden_characters_are_written_out() -> None:
    assert visible("a\nb\u202ec\u00e9") == "a\\u{000A}b\\u{202E}c\u00e9"
    lines = envelope_lines(payload(subject="x\r\nBcc: evil@example.com"))
    assert "Subject: x\\u{000D}\\u{000A}Bcc: evil@example.com" in lines
    assert len(lines) == 9


def test_digest_is_sha256_of_the_lines_each_ended_by_a_line_feed() -> None:
    lines = ["From: a", "Subject: \u00e9"]
    assert shown_digest(lines) == hashlib.sha256("From: a\nSubject: \u00e9\n".encode()).hexdigest()
    assert shown_digest(envelope_lines(payload())) != shown_digest(envelope_lines(payload(bcc=())))


def test_expiry_is_utc_whole_seconds() -> None:
    assert expiry_text(0) == "1970-01-01 00:00:00 UTC"
    assert expiry_text(1999) == "1970-01-01 00:00:01 UTC"
