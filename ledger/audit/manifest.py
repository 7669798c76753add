"""An export's first and last lines: the manifest that says what was exported under which
rules, and the trailer that binds every line before it (a SHA-256, and with the key an HMAC).

With the trailer a removed send, a cut tail or an edited line is a finding of its own; with the
key nobody can recompute the trailer to hide one. Exports made before the manifest existed
have neither line and still replay: the report then says completeness was not checked.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final, Literal

import msgspec
from msgspec import Struct

EXPORT_FORMAT: Final = 2  # 1: entry lines only (no manifest, no trailer)
TRAILER_DOMAIN: Final = b"angelos/send-ledger/v1/export\n"


class ExportRules(Struct, frozen=True, kw_only=True):
    """The ledger's rules in force when the export was made (claims record their own grace)."""

    recovery_grace_ms: int
    retention_ms: int


class Manifest(Struct, frozen=True, kw_only=True):
    """The first line: which ledger, when, which range, how much, under which key and rules."""

    angelos_export: Literal["manifest"] = "manifest"
    format: int = EXPORT_FORMAT
    namespace: str
    store_id: str = ""
    exported_ms: int
    since_ms: int = 0
    until_ms: int | None = None
    pid: str = ""
    streams: int
    index_entries: int
    mac_key_id: str = ""
    rules: ExportRules


class Trailer(Struct, frozen=True, kw_only=True):
    """The last line: counts of what was written and the digest of every line before it."""

    angelos_export: Literal["trailer"] = "trailer"
    lines: int  # entry and missing-stream lines, the manifest and trailer not counted
    streams: int
    events: int
    missing: int
    sha256: str
    mac: str = ""


class Binder:
    """The running SHA-256 over the exact bytes of each line and its newline."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, line: bytes) -> None:
        """Take one line (without its newline) into the digest."""
        self._hash.update(line)
        self._hash.update(b"\n")

    def hexdigest(self) -> str:
        """Return the digest of every line taken so far."""
        return self._hash.hexdigest()


def trailer_mac(key: bytes, sha256: str) -> str:
    """Return the trailer's HMAC-SHA-256 over its digest, under the ledger key."""
    return hmac.new(key, TRAILER_DOMAIN + sha256.encode("ascii"), hashlib.sha256).hexdigest()


def marker(raw: object) -> str:
    """Say which export line a decoded JSON value is: manifest, trailer, or '' (an entry)."""
    if isinstance(raw, dict):
        kind = raw.get("angelos_export")
        if kind in ("manifest", "trailer"):
            return str(kind)
    return ""


def as_manifest(raw: object) -> Manifest | None:
    """Read a manifest line; None when it does not fit (a finding for the caller)."""
    try:
        return msgspec.convert(raw, Manifest)
    except msgspec.ValidationError:
        return None


def as_trailer(raw: object) -> Trailer | None:
    """Read a trailer line; None when it does not fit (a finding for the caller)."""
    try:
        return msgspec.convert(raw, Trailer)
    except msgspec.ValidationError:
        return None
