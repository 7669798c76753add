"""The approval digest (sending.md §2.8): composition computes it, dispatch verifies it."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence

GRAPH_TRANSPORT = "microsoft_graph"

# Go's encoding/json escapes these even with ensure_ascii-style output.
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def digest_document(sender: str, recipients: Sequence[str], raw: bytes) -> bytes:
    """The exact JSON bytes hashed: {"From":…,"Recipients":[…],"Raw":"<base64>"}."""
    document = {
        "From": sender,
        "Recipients": list(recipients),
        "Raw": base64.b64encode(raw).decode("ascii"),
    }
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=True)
    return text.translate(_GO_ESCAPES).encode("ascii")


def approval_digest(
    sender: str, recipients: Sequence[str], raw: bytes, *, transport: str = "smtp"
) -> str:
    """SHA-256 hex binding the envelope sender, envelope recipients and exact wire bytes."""
    envelope_from = f"{GRAPH_TRANSPORT}\x00{sender}" if transport == GRAPH_TRANSPORT else sender
    return hashlib.sha256(digest_document(envelope_from, recipients, raw)).hexdigest()
