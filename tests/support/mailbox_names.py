"""Mailbox names on the wire for test tooling, independent of the product's IMAP codec.

Used by tests/support/imap.py and by scripts/load_fixtures.py (which loads the corpus).
"""

from __future__ import annotations

import base64


def encode_mailbox(name: str) -> str:
    """IMAP modified UTF-7 (RFC 3501 §5.1.3) of a mailbox name."""
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            raw = "".join(pending).encode("utf-16-be")
            out.append("&" + base64.b64encode(raw).decode().rstrip("=").replace("/", ",") + "-")
            pending.clear()

    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            pending.append(ch)
    flush()
    return "".join(out)


def quote_mailbox(name: str) -> str:
    """The mailbox name as a quoted IMAP string, ready to pass to aioimaplib."""
    encoded = encode_mailbox(name)
    return '"' + encoded.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["encode_mailbox", "quote_mailbox"]
