"""The text a person approves a send by: one canonical rendering of a preparation's envelope.

The passkey approval page and the MCP elicitation prompt both show `envelope_lines(payload)`
and record `shown_digest(lines)` as the `approved` event's `shown_sha256`, so the ledger names
the exact text that was in front of the person. Only stored data is shown (never what a client
says about it), and every character that could hide or reorder text (controls, format
characters such as bidi overrides, line and paragraph separators) is written as `\\u{XXXX}`, so
one line is always one line and what is hashed is what is read.
"""

from __future__ import annotations

import hashlib
import unicodedata
from datetime import UTC, datetime
from typing import Final

from schemas.ledger import PreparedPayload

NONE: Final = "(none)"
_HIDDEN: Final = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


def envelope_lines(payload: PreparedPayload) -> list[str]:
    """The lines shown for approval: sender, each recipient, subject, attachments, digest, expiry.

    One line per recipient and per attachment; an empty recipient field reads `(none)` (never
    an address), no attachments reads `Attachments: none`.
    """
    lines = [f"From: {visible(payload.from_)}"]
    for label, addresses in (("To", payload.to), ("Cc", payload.cc), ("Bcc", payload.bcc)):
        lines += [f"{label}: {visible(a)}" for a in addresses] or [f"{label}: {NONE}"]
    lines.append(f"Subject: {visible(payload.subject)}")
    lines += [
        f"Attachment: {visible(a.filename)} ({a.bytes} bytes)" for a in payload.attachments
    ] or ["Attachments: none"]
    lines.append(f"Digest: {payload.digest[:8]}")
    lines.append(f"Expires: {expiry_text(payload.expires_ms)}")
    return lines


def shown_digest(lines: list[str]) -> str:
    """The SHA-256 (hex) of the shown lines: UTF-8, each line ended by a line feed."""
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def expiry_text(expires_ms: int) -> str:
    """An expiry instant as shown: `2026-12-03 22:19:33 UTC` (whole seconds)."""
    moment = datetime.fromtimestamp(expires_ms // 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def visible(text: str) -> str:
    """`text` with every control, format, separator or unassigned character as `\\u{XXXX}`."""
    if text.isprintable() and text.isascii():
        return text
    return "".join(
        f"\\u{{{ord(c):04X}}}" if unicodedata.category(c) in _HIDDEN else c for c in text
    )
