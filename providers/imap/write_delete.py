"""Permanent deletion of exactly one message.

Mark the message \\Deleted (conditionally under CONDSTORE), then `UID EXPUNGE <uid>` from
UIDPLUS, then verify the UID is gone. Never a plain EXPUNGE or CLOSE: those would also remove
every other message another client marked \\Deleted. A server that cannot target one message
(no UIDPLUS, Gmail labels) is refused before anything is changed.
"""

from __future__ import annotations

from providers.imap import codec, fetch
from providers.imap.discovery import is_gmail
from providers.imap.pool import ImapPool
from providers.imap.settings import ImapSettings
from providers.imap.write import fetch_state, select_for_write, snapshot
from providers.imap.write_flags import is_conditional, permits, store_flags
from schemas.errors import MailError, OutcomeUnknown, UnsupportedOperation
from schemas.mailbox import Reference
from schemas.mutations import (
    MARKED_DELETED_WARNINGS,
    MutationResult,
    not_applied,
    outcome_on_error,
    unknown,
)
from schemas.results import GMAIL_DELETE_RESTRICTION

NO_UIDPLUS = (
    "permanent deletion needs UIDPLUS (UID EXPUNGE) to remove exactly one message; this server "
    "cannot target one message"
)


def marked_deleted(ref: Reference) -> MutationResult:
    """Return the outcome of a message marked \\Deleted whose removal was not confirmed."""
    return MutationResult(source=ref, status="marked_deleted", warnings=MARKED_DELETED_WARNINGS)


async def delete_permanently(
    pool: ImapPool, settings: ImapSettings, ref: Reference
) -> MutationResult:
    """Expunge exactly one message by UID and confirm it is gone."""
    with outcome_on_error(not_applied(ref)):
        async with pool.session() as session:
            if is_gmail(settings, session.capabilities):
                raise UnsupportedOperation(GMAIL_DELETE_RESTRICTION)
            if "UIDPLUS" not in session.capabilities:
                raise UnsupportedOperation(NO_UIDPLUS)
            selected = await select_for_write(session, ref)
            if not permits(selected.permanent_flags, "\\Deleted"):
                raise UnsupportedOperation("the folder does not keep the \\Deleted flag")
            conditional = is_conditional(session, selected)
            seen = fetch.modseq(await snapshot(session, ref, selected))
            if conditional and seen == 0:
                raise UnsupportedOperation("the server reported no modseq for the message")
            await store_flags(
                session,
                ref.uid,
                "add",
                ["\\Deleted"],
                unchanged_since=seen if conditional else 0,
                sent_outcome=unknown(ref),
            )
            with outcome_on_error(marked_deleted(ref)):
                try:
                    await session.command("EXPUNGE", codec.uid_set([ref.uid]), uid=True)
                except OutcomeUnknown:
                    raise
                except MailError:  # a refusal or a broken session: removal is not confirmed
                    raise OutcomeUnknown("UID EXPUNGE did not confirm the removal") from None
            with outcome_on_error(unknown(ref)):
                try:
                    left = await fetch_state(session, ref.uid)
                except MailError:
                    raise OutcomeUnknown("the deletion could not be verified") from None
                if left is not None:
                    raise OutcomeUnknown("the message is still present after UID EXPUNGE")
    return MutationResult(source=ref, status="deleted")
