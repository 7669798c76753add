"""mail_query operations built so far: capabilities and folders."""

from __future__ import annotations

from msgspec import UNSET

from providers.mailbox import Mailbox
from schemas import errors
from schemas.args.query import Capabilities, Folders
from schemas.results import GMAIL_DELETE_RESTRICTION, CapabilitiesResult, FoldersResult
from service.context import AppContext
from service.principal import Principal
from service.readiness import operator_blockers, readiness


def require_mailbox(app: AppContext) -> Mailbox:
    """Return the configured mailbox or fail as unavailable."""
    if app.mailbox is None:
        raise errors.ServiceUnavailable("the mailbox is not configured on this server")
    return app.mailbox


async def capabilities(
    app: AppContext, principal: Principal, args: Capabilities
) -> CapabilitiesResult:
    """Report the server's IMAP capabilities, the operator's gates and this caller's readiness."""
    server = await require_mailbox(app).capabilities()
    report = readiness(app, principal, server)
    send_off = operator_blockers(report.send.blocked_by)
    policy = app.config.send_policy
    return CapabilitiesResult(
        server=server,
        mailbox_writes_enabled=not operator_blockers(report.write.blocked_by),
        permanent_delete_enabled=not operator_blockers(report.delete.blocked_by),
        send_enabled=not send_off,
        smtp_stores_sent=app.smtp_stores_sent or server.smtp_stores_sent,
        readiness=report,
        permanent_delete_restriction=(GMAIL_DELETE_RESTRICTION if server.gmail_labels else UNSET),
        send_disabled_reason=send_off[0].reason if send_off else UNSET,
        ledger_archive=UNSET
        if app.archive is None or app.archive.status is None
        else app.archive.status,
        send_approval=policy.required or UNSET,
        send_rate_limit=UNSET if policy.rate is None else policy.rate.text,
        recipient_allowlist=UNSET if policy.allowlist is None else True,
    )


async def folders(app: AppContext, principal: Principal, args: Folders) -> FoldersResult:
    """List every folder with its exact name, delimiter and attributes."""
    return FoldersResult(folders=await require_mailbox(app).folders())
