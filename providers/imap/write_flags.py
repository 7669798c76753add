"""Flag deltas on one message, conditional under CONDSTORE.

The flag set is never replaced: only +FLAGS/-FLAGS with the caller's flags. With CONDSTORE the
STORE carries UNCHANGEDSINCE the modseq we just read, so a change another client makes between
our read and our STORE comes back as [MODIFIED] and is reported as a conflict, never applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from providers.imap import codec, fetch, responses
from providers.imap.fetch import FetchAttrs
from providers.imap.pool import ImapPool
from providers.imap.responses import SelectResult
from providers.imap.session import ImapSession
from providers.imap.write import fetch_state, flag_names, message_attrs, select_for_write, snapshot
from schemas.errors import Conflict, MailError, UnsupportedOperation
from schemas.mailbox import Reference
from schemas.mutations import (
    FLAGS_UNKNOWN_WARNING,
    UNCONDITIONAL_WARNING,
    FlagResult,
    flag_skeleton,
    outcome_on_error,
)

Operation = Literal["add", "remove"]

POSTCONDITION_CONFLICT = (
    "the message's flags after the change do not match the request; another client may have "
    "changed them; read the message again before deciding on a new change"
)


def permits(permanent_flags: Sequence[str] | None, flag: str) -> bool:
    """Tell whether PERMANENTFLAGS allows `flag` (exactly, any case, or \\* for a keyword)."""
    if permanent_flags is None:  # RFC 3501 §7.1: without PERMANENTFLAGS every flag is permanent
        return True
    allowed = {f.lower() for f in permanent_flags}
    return flag.lower() in allowed or (not flag.startswith("\\") and "\\*" in allowed)


def is_conditional(session: ImapSession, selected: SelectResult) -> bool:
    """Tell whether a STORE in the selected folder can carry UNCHANGEDSINCE."""
    return "CONDSTORE" in session.capabilities and selected.highest_modseq != 0


def postcondition_met(attrs: FetchAttrs, operation: Operation, flags: Sequence[str]) -> bool:
    """Tell whether the message's flags show the requested delta (compared case-insensitively)."""
    present = {f.lower() for f in flag_names(attrs)}
    wanted = {f.lower() for f in flags}
    return wanted <= present if operation == "add" else not (wanted & present)


async def store_flags(
    session: ImapSession,
    uid: int,
    operation: Operation,
    flags: Sequence[str],
    *,
    unchanged_since: int,
    sent_outcome: object,
) -> FetchAttrs:
    """UID STORE a flag delta (UNCHANGEDSINCE when non-zero) and return the verified state.

    A lost or refused reply carries `sent_outcome`; [MODIFIED] or a state that does not show
    the delta is a Conflict. Dovecot answers a STORE that changes nothing without FETCH data,
    so the state is then read back instead of being taken as missing.
    """
    args = [codec.uid_set([uid])]
    if unchanged_since:
        args.append(codec.raw(f"(UNCHANGEDSINCE {unchanged_since})"))
    args.append(codec.raw("+FLAGS" if operation == "add" else "-FLAGS"))
    args.append(codec.raw("(" + " ".join(codec.atom(f) for f in flags) + ")"))
    with outcome_on_error(sent_outcome):
        response = await session.command("STORE", *args, uid=True)
    try:
        modified = responses.find_code(response, "MODIFIED")
        attrs = message_attrs(response, uid)
    except MailError:
        raise Conflict("the server's answer to the flag change could not be read") from None
    if modified is not None:
        raise Conflict()
    if attrs is None:
        with outcome_on_error(sent_outcome):
            attrs = await fetch_state(session, uid)
        if attrs is None:
            raise Conflict("the message disappeared while its flags were changed")
    if not postcondition_met(attrs, operation, flags):
        raise Conflict(POSTCONDITION_CONFLICT)
    return attrs


async def change_flags(
    pool: ImapPool,
    ref: Reference,
    operation: Operation,
    flags: Sequence[str],
    unchanged_since: int = 0,
) -> FlagResult:
    """Add or remove flags on one message; `unchanged_since` > 0 is the caller's precondition."""
    with outcome_on_error(flag_skeleton(ref)):
        async with pool.session() as session:
            selected = await select_for_write(session, ref)
            refused = [f for f in flags if not permits(selected.permanent_flags, f)]
            if refused:
                raise UnsupportedOperation("the folder does not keep one of these flags")
            conditional = is_conditional(session, selected)
            if unchanged_since and not conditional:
                raise UnsupportedOperation(
                    "unchanged_since needs CONDSTORE modseqs, which this folder does not offer"
                )
            seen = fetch.modseq(await snapshot(session, ref, selected))
            if conditional and seen == 0:
                raise UnsupportedOperation("the server reported no modseq for the message")
            if unchanged_since and seen > unchanged_since:
                raise Conflict()
            after = await store_flags(
                session,
                ref.uid,
                operation,
                flags,
                unchanged_since=seen if conditional else 0,
                sent_outcome=flag_skeleton(ref, FLAGS_UNKNOWN_WARNING),
            )
    modseq = fetch.modseq(after) if conditional else 0
    if conditional and modseq == 0:
        raise Conflict("the server reported no modseq after the change", outcome=flag_skeleton(ref))
    return FlagResult(
        reference=ref,
        flags=fetch.flags(after),
        modseq=modseq,
        conditional=conditional,
        warnings=[] if conditional else [UNCONDITIONAL_WARNING],
    )
