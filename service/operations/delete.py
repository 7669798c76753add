"""mail_delete_permanently: one exact message, expunged by UID (tools.md §10).

The pipeline has checked mail.write and the writes gate; here the provider and the delete gate
are checked before any mailbox access, in the order of tools.md §10.
"""

from __future__ import annotations

from schemas import errors
from schemas.args.common import Ref
from schemas.mutations import MutationResult
from schemas.results import GMAIL_DELETE_RESTRICTION
from service.context import AppContext
from service.operations.query import require_mailbox
from service.operations.read import imap_reference
from service.principal import Principal


async def delete_permanently(app: AppContext, principal: Principal, args: Ref) -> MutationResult:
    """Mark one message \\Deleted, UID EXPUNGE exactly that UID and confirm it is gone."""
    mail = app.config.mail
    if mail is not None and mail.provider == "microsoft":
        raise errors.UnsupportedOperation("permanent deletion is unsupported for Microsoft Graph")
    if mail is not None and mail.gmail_imap:
        raise errors.UnsupportedOperation(GMAIL_DELETE_RESTRICTION)
    if not app.gates.delete:
        raise errors.DeploymentDisabled("permanent deletion is disabled by the server operator")
    reference = imap_reference(args)
    return await require_mailbox(app).delete_permanently(reference)
