"""Why a confirm may not claim, decided without consuming anything: the stream's owner, grant,
digest and deadline, the live allowlist, and the claim script's policy refusals."""

from __future__ import annotations

from datetime import UTC, datetime

from msgspec import UNSET, UnsetType

from ledger.chain import verified_events
from ledger.dispatch.writes import Run, RunWriter
from ledger.lifecycle import UNCLAIMED, Lifecycle, fold
from ledger.store.answers import Head
from ledger.store.ledger_store import LedgerStore, head_of
from schemas import errors
from schemas.ledger import LedgerEntry, decode_payload
from schemas.ledger_events import ConfirmRefused
from schemas.send_policy import SendPolicy

GENERIC_REFUSAL = "prepared message missing, expired, or digest mismatch; nothing was sent"
EXPIRED_REFUSAL = (
    "this preparation expired before it was confirmed; nothing was consumed or sent. Prepare "
    "the message again if it is still wanted"
)
GRANT_REFUSAL = (
    "this preparation was made through another client's authorization (or one since revoked) "
    "and only that authorization can confirm it; prepare the message again through this "
    "connection; nothing was sent"
)
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
            "not on the current recipient allowlist: "
            + ", ".join(refused)
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


def fold_or_refuse(run: Run, now: int, entries: list[LedgerEntry], writes: RunWriter) -> Lifecycle:
    """Fold the stream, or refuse a confirm that may not claim it (recorded as a note)."""
    if not entries:
        raise errors.OperationFailed(GENERIC_REFUSAL)
    lifecycle = fold(verified_events(run.pid, entries), [e.srv_ms for e in entries])
    prepared = lifecycle.prepared
    if prepared is None:
        raise errors.OperationFailed(GENERIC_REFUSAL)
    run.message_id = prepared.message_id
    head = head_of(entries)
    assert head is not None
    if prepared.owner != run.owner:
        writes.annotate_later(run.pid, head, ConfirmRefused(reason="owner_mismatch"))
        raise errors.OperationFailed(GENERIC_REFUSAL)
    if (None if prepared.grant is UNSET else prepared.grant) != run.grant:
        # The owner's own preparation, made through another client's grant (or one revoked
        # since): only that grant may confirm it; send_status still reads it.
        writes.annotate_later(run.pid, head, ConfirmRefused(reason="grant_mismatch"))
        raise errors.OperationFailed(GRANT_REFUSAL)
    if prepared.digest != run.digest:
        writes.annotate_later(run.pid, head, ConfirmRefused(reason="digest_mismatch"))
        raise errors.OperationFailed(GENERIC_REFUSAL)
    # Expired answers the same whether or not the sweeper has recorded it yet.
    if lifecycle.state == "EXPIRED" or (
        lifecycle.state in UNCLAIMED and now >= prepared.expires_ms
    ):
        writes.annotate_later(run.pid, head, ConfirmRefused(reason="expired"))
        raise errors.OperationFailed(EXPIRED_REFUSAL)
    return lifecycle
