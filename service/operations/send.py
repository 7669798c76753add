"""mail_send_confirmed and mail_query send_status: the ledger decides, the projection reports."""

from __future__ import annotations

from ledger.projection import project
from schemas import errors
from schemas.args.prepare import SendConfirmed
from schemas.args.query import SendStatus
from schemas.ledger import LedgerUnavailable, SendStatusResult
from schemas.send import ReplayResult, SendResult
from service.context import AppContext
from service.principal import Principal


async def send_confirmed(
    app: AppContext, principal: Principal, args: SendConfirmed
) -> SendResult | ReplayResult:
    """Dispatch an approved preparation at most once; a consumed one is replayed, not resent."""
    dispatcher = app.sending.dispatcher
    if dispatcher is None:
        raise errors.DeploymentDisabled(
            "sending requires explicit server enablement and a durable send store"
        )
    return await dispatcher.confirm(
        args.prepared_id,
        principal.owner,
        args.confirmed_digest,
        args.append_sent,
        principal.grant,
    )


async def send_status(app: AppContext, principal: Principal, args: SendStatus) -> SendStatusResult:
    """Project one preparation's ledger from a single read-only round trip (TIME + XRANGE)."""
    store = app.sending.store
    if store is None:
        raise errors.DeploymentDisabled(
            "send status needs a durable send store; unavailable status is not proof that "
            "nothing was sent"
        )
    try:
        now_ms, entries = await store.read(args.prepared_id)
    except LedgerUnavailable:
        raise errors.OperationFailed(
            "the send ledger store did not answer; this is not proof that nothing was sent"
        ) from None
    return project(entries, principal.owner, now_ms)
