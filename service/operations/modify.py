"""mail_modify: flag deltas, folder rename, move and trash. Every action needs
mail.write and the writes gate, which the call pipeline checks before any handler runs."""

from __future__ import annotations

from msgspec import UNSET

from schemas.args.modify import Move, Rename, SetFlags, Trash
from schemas.mutations import FlagResult, FolderRenamed, MutationResult, outcome_on_error
from service.context import AppContext
from service.operations.query import require_mailbox
from service.operations.read import fit_reference, graph_mailbox
from service.principal import Principal


async def set_flags(app: AppContext, principal: Principal, args: SetFlags) -> FlagResult:
    """Add or remove the given flags; `unchanged_since` is the caller's modseq precondition."""
    reference = fit_reference(args.reference, graph_mailbox(app))
    since = 0 if args.unchanged_since is UNSET else args.unchanged_since
    return await require_mailbox(app).change_flags(reference, args.operation, args.flags, since)


async def rename(app: AppContext, principal: Principal, args: Rename) -> FolderRenamed:
    """RENAME one folder; any failure reports `{"renamed": false}` as its outcome."""
    with outcome_on_error(FolderRenamed(renamed=False)):
        await require_mailbox(app).rename_folder(args.old, args.new)
    return FolderRenamed(renamed=True)


async def move(app: AppContext, principal: Principal, args: Move) -> MutationResult:
    """Move one message with native MOVE; the source reference is invalid afterwards."""
    reference = fit_reference(args.reference, graph_mailbox(app))
    return await require_mailbox(app).move(reference, args.destination)


async def trash(app: AppContext, principal: Principal, args: Trash) -> MutationResult:
    """Move one message to the single advertised Trash folder."""
    return await require_mailbox(app).trash(fit_reference(args.reference, graph_mailbox(app)))
