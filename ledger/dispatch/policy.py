"""The owner's send policy at the claim: the live allowlist, and the claim script's refusals."""

from __future__ import annotations

from datetime import UTC, datetime

from msgspec import UnsetType

from ledger.dispatch.writes import RunWriter
from ledger.lifecycle import Lifecycle
from ledger.store.answers import Head
from ledger.store.ledger_store import LedgerStore
from schemas import errors
from schemas.ledger import decode_payload
from schemas.ledger_events import ConfirmRefused
from schemas.send_policy import SendPolicy

APPROVAL_MISSING = (
    "this preparation requires a person's approval, and none is recorded; nothing was sent"
)


async def check_recipients(
    store: LedgerStore, policy: SendPolicy, lifecycle: Lifecycle, pid: str, head: Head,
    writes: RunWriter,
) -> None:  # fmt: skip
    """Refuse, before the claim, recipients the live allowlist no longer allows.

    Prepare checked them against the list it recorded; only a list that differs since (a
    narrowed one wins) needs the stored payload read again, without consuming it.
    """
    allowlist = policy.allowlist
    prepared = lifecycle.prepared
    if allowlist is None or prepared is None:
        return
    frozen = prepared.allowlist_sha256
    if not isinstance(frozen, UnsetType) and frozen == allowlist.digest:
        return
    blob = await store.payload(pid)
    if blob is None:
        return  # the claim answers payload_missing
    payload = decode_payload(blob)
    refused = allowlist.refused(payload.to, payload.cc, payload.bcc, payload.recipients)
    if refused:
        writes.annotate_later(pid, head, ConfirmRefused(reason="recipient_not_allowed"))
        raise errors.RecipientNotAllowed(
            "not on the current recipient allowlist: " + ", ".join(refused)
            + "; nothing was sent and the preparation is unchanged"
        )


def approval_missing(pid: str, head: Head, writes: RunWriter) -> errors.MailError:
    """The claim script found no approval that the preparation requires."""
    writes.annotate_later(pid, head, ConfirmRefused(reason="approval_missing"))
    return errors.ApprovalUnavailable(APPROVAL_MISSING)


def rate_limited(pid: str, head: Head, writes: RunWriter, until_ms: int) -> errors.MailError:
    """The claim script refused the claim under the send rate limit, until `until_ms`."""
    writes.annotate_later(pid, head, ConfirmRefused(reason="rate_limited"))
    at = datetime.fromtimestamp(until_ms / 1000, UTC).isoformat(timespec="seconds")
    return errors.RateLimited(
        f"the send rate limit is reached; a send is possible again at {at}; nothing was sent "
        "and the preparation is unchanged",
        outcome={"status": "not_sent", "retry_at": at},
    )
