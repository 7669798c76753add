"""mail_delete_permanently: one exact message, expunged by UID.

The pipeline has already applied the delete class of service/readiness.py: scope, writes gate,
provider support and delete gate, in that order, before any mailbox access.
"""

from __future__ import annotations

from schemas.args.common import Ref
from schemas.mutations import MutationResult
from service.context import AppContext
from service.operations.query import require_mailbox
from service.operations.read import fit_reference, graph_mailbox
from service.principal import Principal


async def delete_permanently(app: AppContext, principal: Principal, args: Ref) -> MutationResult:
    """Mark one message \\Deleted, UID EXPUNGE exactly that UID and confirm it is gone."""
    reference = fit_reference(args, graph_mailbox(app))
    return await require_mailbox(app).delete_permanently(reference)
