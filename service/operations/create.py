"""mail_create: additive mailbox writes. Every action needs mail.write and the
writes gate, which the call pipeline checks before any handler runs."""

from __future__ import annotations

from schemas.args.create import Copy, CreateFolder
from schemas.mutations import FolderCreated, MutationResult, outcome_on_error
from service.context import AppContext
from service.operations.query import require_mailbox
from service.operations.read import fit_reference, graph_mailbox
from service.principal import Principal


async def create_folder(app: AppContext, principal: Principal, args: CreateFolder) -> FolderCreated:
    """CREATE one folder; any failure reports `{"created": false}` as its outcome."""
    with outcome_on_error(FolderCreated(created=False)):
        await require_mailbox(app).create_folder(args.name)
    return FolderCreated(created=True)


async def copy(app: AppContext, principal: Principal, args: Copy) -> MutationResult:
    """Copy one message; a destination reference only from an exact single-UID mapping."""
    reference = fit_reference(args.reference, graph_mailbox(app))
    return await require_mailbox(app).copy(reference, args.destination)
