"""The approval digest: composition computes it, dispatch verifies it."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence

GRAPH_TRANSPORT = "microsoft_graph"

# Go's encoding/json escapes these even with ensure_ascii-style output.
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def _document_head(sender: str, recipients: Sequence[str]) -> bytes:
    """The document up to the base64 of Raw: `{"From":…,"Recipients":[…],"Raw":"`.

    Base64 needs no JSON escape, so the multi-megabyte Raw value is never run through the
    JSON encoder (or the escape table); it is appended or hashed as it is.
    """
    envelope = {"From": sender, "Recipients": list(recipients)}
    text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=True)
    return text[:-1].translate(_GO_ESCAPES).encode("ascii") + b',"Raw":"'


def digest_document(sender: str, recipients: Sequence[str], raw: bytes) -> bytes:
    """The exact JSON bytes hashed: {"From":…,"Recipients":[…],"Raw":"<base64>"}."""
    return _document_head(sender, recipients) + base64.b64encode(raw) + b'"}'


def approval_digest(
    sender: str, recipients: Sequence[str], raw: bytes, *, transport: str = "smtp"
) -> str:
    """SHA-256 hex binding the envelope sender, envelope recipients and exact wire bytes."""
    envelope_from = f"{GRAPH_TRANSPORT}\x00{sender}" if transport == GRAPH_TRANSPORT else sender
    digest = hashlib.sha256(_document_head(envelope_from, recipients))
    digest.update(base64.b64encode(raw))
    digest.update(b'"}')
    return digest.hexdigest()
