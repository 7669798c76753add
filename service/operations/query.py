"""mail_query operations built so far: capabilities and folders."""

from __future__ import annotations

from msgspec import UNSET

from providers.mailbox import Mailbox
from schemas import errors
from schemas.args.query import Capabilities, Folders
from schemas.results import GMAIL_DELETE_RESTRICTION, CapabilitiesResult, FoldersResult
from service.context import AppContext
from service.principal import Principal


def require_mailbox(app: AppContext) -> Mailbox:
    """Return the configured mailbox or fail as unavailable."""
    if app.mailbox is None:
        raise errors.ServiceUnavailable("the mailbox is not configured on this server")
    return app.mailbox


async def capabilities(
    app: AppContext, principal: Principal, args: Capabilities
) -> CapabilitiesResult:
    """Report the server's IMAP capabilities together with the operator's effective gates."""
    server = await require_mailbox(app).capabilities()
    gmail = server.gmail_labels
    return CapabilitiesResult(
        server=server,
        mailbox_writes_enabled=app.gates.writes,
        permanent_delete_enabled=(
            app.gates.writes and app.gates.delete and server.permanent_delete and not gmail
        ),
        send_enabled=app.send_ready,
        smtp_stores_sent=app.smtp_stores_sent or server.smtp_stores_sent,
        permanent_delete_restriction=GMAIL_DELETE_RESTRICTION if gmail else UNSET,
        send_disabled_reason=UNSET if app.send_ready else send_disabled_reason(app),
    )


def send_disabled_reason(app: AppContext) -> str:
    """Say why sending is off: the operator's gate, or what the store's self-check found."""
    if not app.gates.send:
        return "the operator has not enabled sending (MAIL_ENABLE_SEND=1)"
    return app.sending.reason or "the durable send store is not usable"


async def folders(app: AppContext, principal: Principal, args: Folders) -> FoldersResult:
    """List every folder with its exact name, delimiter and attributes."""
    return FoldersResult(folders=await require_mailbox(app).folders())
