"""What the approval page knows of one preparation: read from the ledger, never consumed.

`read_preparation` folds the preparation's stream and reads its private payload without taking
it; the answer is either an Approvable (the exact lines to show and their SHA-256) or the one
reason the page refuses. The WebAuthn challenge of an approval is a stored one-time nonce
followed by the SHA-256 of (pid, shown text), so the signature the authenticator makes covers
both, and a page showing other text cannot be approved with it.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final, Literal

from msgspec import Struct, UnsetType

from ledger.chain import verified_events
from ledger.lifecycle import fold
from ledger.store.answers import Head
from ledger.store.ledger_store import LedgerStore, head_of
from schemas.ledger import Event, LedgerCorrupt, PreparedPayload, decode_unclaimed
from schemas.ledger_events import ApprovalRefused, Approved
from schemas.send_policy import accepts
from service.approval.text import envelope_lines, shown_digest
from service.wire.b64url import decode_b64url, encode_b64url

Reason = Literal[
    "unknown",  # no such preparation, or not this owner's
    "unreadable",  # its record fails its checks
    "not_required",  # it needs no approval
    "elicitation_only",  # only an answer in the application approves it
    "approved",
    "declined",  # the owner declined it on this page
    "expired",
    "claimed",  # claimed for sending: sent, being sent, or settled
]
NONCE_BYTES: Final = 32
_LABEL: Final = b"angelos/send-approval/v1\x00"


class Approvable(Struct, frozen=True, kw_only=True):
    """A preparation the owner may approve now, with the text shown for it."""

    pid: str
    payload: PreparedPayload
    lines: list[str]
    shown: str  # shown_digest(lines)
    head: Head

    def __repr__(self) -> str:  # the envelope stays out of logs and tracebacks
        return f"Approvable(pid={self.pid})"


class Refused(Struct, frozen=True):
    """Why the page approves nothing for this preparation."""

    reason: Reason


async def read_preparation(store: LedgerStore, pid: str, owner: str) -> Approvable | Refused:
    """Fold the stream and read the payload (not consumed); judge whether `owner` may approve.

    Raises LedgerUnavailable when the store does not answer.
    """
    now_ms, entries = await store.read(pid)
    if not entries:
        return Refused("unknown")
    try:
        events = verified_events(pid, entries)
        lifecycle = fold(events, [e.srv_ms for e in entries])
    except LedgerCorrupt:
        return Refused("unreadable")
    prepared = lifecycle.prepared
    if prepared is None or not hmac.compare_digest(prepared.owner, owner):
        return Refused("unknown")
    if lifecycle.state != "PREPARED":
        states: dict[str, Reason] = {"APPROVED": "approved", "EXPIRED": "expired"}
        return Refused(states.get(lifecycle.state, "claimed"))
    if isinstance(prepared.approval, UnsetType):
        return Refused("not_required")
    if not accepts(prepared.approval, "passkey"):
        return Refused("elicitation_only")
    if now_ms >= prepared.expires_ms:
        return Refused("expired")
    if declined(events):
        return Refused("declined")
    blob = await store.payload(pid)
    if blob is None:
        return Refused("expired")  # an unclaimed preparation loses its payload only at its end
    try:
        payload = decode_unclaimed(blob, pid, prepared)
    except LedgerCorrupt:
        return Refused("unreadable")
    head = head_of(entries)
    assert head is not None
    lines = envelope_lines(payload)
    return Approvable(pid=pid, payload=payload, lines=lines, shown=shown_digest(lines), head=head)


def declined(events: list[Event]) -> bool:
    """Whether the owner declined this preparation on the approval page."""
    return any(
        isinstance(e.data, ApprovalRefused)
        and e.data.mode == "passkey"
        and e.data.reason == "declined"
        for e in events
    )


def binding(pid: str, shown: str) -> bytes:
    """The SHA-256 an approval's challenge carries: this preparation and this shown text."""
    return hashlib.sha256(_LABEL + pid.encode("ascii") + b"\x00" + shown.encode("ascii")).digest()


def approval_challenge(nonce: str, pid: str, shown: str) -> str:
    """The WebAuthn challenge (base64url): the stored nonce's bytes, then the binding."""
    raw = decode_b64url(nonce)
    if raw is None or len(raw) != NONCE_BYTES:
        raise ValueError("a stored challenge is 32 bytes of base64url")
    return encode_b64url(raw + binding(pid, shown))


def split_challenge(challenge: str) -> tuple[str, bytes] | None:
    """The nonce (as stored) and the binding an answered challenge carries, or None."""
    raw = decode_b64url(challenge)
    if raw is None or len(raw) != NONCE_BYTES + hashlib.sha256().digest_size:
        return None
    return encode_b64url(raw[:NONCE_BYTES]), raw[NONCE_BYTES:]


def approved_event(shown: str, credential_id: str) -> Approved:
    """The `approved` event of a passkey approval; the credential only by its SHA-256."""
    raw = decode_b64url(credential_id)
    if raw is None:
        raise ValueError("a credential ID is base64url")
    return Approved(
        mode="passkey",
        client_name="browser",
        client_version="",
        protocol="",
        shown_sha256=shown,
        credential_sha256=hashlib.sha256(raw).hexdigest(),
    )
