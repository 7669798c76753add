"""Guarded IMAP writes: create and rename folders, copy, move and trash one message.

Every write selects its folder read-write and re-checks UIDVALIDITY before the mutating
command; a failure before that command reports `not_applied`, a failure of the command itself
`unknown`. Nothing here retries: a lost reply leaves the session broken and the
caller must verify. MOVE is only ever the server's own command.
"""

from __future__ import annotations

from providers.imap import codec, responses
from providers.imap.append import unique_role_folder
from providers.imap.fetch import FetchAttrs, parse_fetch
from providers.imap.pool import ImapPool
from providers.imap.responses import Atom, ImapResponse, SelectResult
from providers.imap.session import ImapSession
from schemas.errors import (
    InvalidArguments,
    MailError,
    NotFound,
    StaleReference,
    UnsupportedOperation,
)
from schemas.mailbox import Reference
from schemas.mutations import (
    NO_MAPPING_WARNING,
    MutationResult,
    not_applied,
    outcome_on_error,
    unknown,
)

NO_MOVE = "this server has no native MOVE; a move is never emulated with COPY, STORE and EXPUNGE"


# --- shared steps -----------------------------------------------------------------------------


async def select_for_write(session: ImapSession, ref: Reference) -> SelectResult:
    """SELECT the reference's folder read-write and require the reference's UIDVALIDITY."""
    selected = await session.select(ref.folder)
    if selected.uid_validity != ref.uid_validity:
        raise StaleReference()
    if selected.read_only:
        raise UnsupportedOperation("the server opened this folder read-only")
    return selected


def message_attrs(response: ImapResponse, uid: int) -> FetchAttrs | None:
    """Return the last FETCH data the response holds for `uid`, or None."""
    wanted = Atom(str(uid))
    found = [attrs for attrs in parse_fetch(response) if attrs.get("UID") == wanted]
    return found[-1] if found else None


async def fetch_state(session: ImapSession, uid: int) -> FetchAttrs | None:
    """UID FETCH the message's flags (and MODSEQ with CONDSTORE); None when it is absent."""
    items = "(UID FLAGS MODSEQ)" if "CONDSTORE" in session.capabilities else "(UID FLAGS)"
    return message_attrs(await session.uid_fetch([uid], codec.raw(items)), uid)


async def snapshot(session: ImapSession, ref: Reference, selected: SelectResult) -> FetchAttrs:
    """Read the selected message's current flags and MODSEQ; NotFound when it is not there."""
    if ref.uid >= selected.uid_next:
        raise NotFound()
    attrs = await fetch_state(session, ref.uid)
    if attrs is None:
        raise NotFound()
    return attrs


def flag_names(attrs: FetchAttrs) -> list[str]:
    """Return every flag of a FETCH as sent (unbounded, for post-condition checks)."""
    value = attrs.get("FLAGS")
    if not isinstance(value, list):
        return []
    return [responses.as_text(flag) for flag in value if flag is not None]


def single_copyuid(response: ImapResponse, uid: int) -> tuple[int, int] | None:
    """Return (UIDVALIDITY, new UID) when COPYUID maps exactly `uid` to one UID, else None.

    UID ranges are never expanded: only a single exact source and destination UID count.
    """
    try:
        args = responses.find_code(response, "COPYUID")
    except MailError:  # an unreadable code after the server's OK: no usable mapping
        return None
    if args is None or len(args) != 3:
        return None
    numbers: list[int] = []
    for arg in args:
        if not (isinstance(arg, Atom) and arg.isascii() and arg.isdigit()):
            return None
        numbers.append(int(arg))
    validity, source, destination = numbers
    if source != uid or not (1 <= validity <= codec.UID_MAX and 1 <= destination <= codec.UID_MAX):
        return None
    return validity, destination


def require_move(session: ImapSession) -> None:
    """Refuse a move unless the server advertises MOVE."""
    if "MOVE" not in session.capabilities:
        raise UnsupportedOperation(NO_MOVE)


async def transfer(
    session: ImapSession, verb: str, ref: Reference, destination: str
) -> MutationResult:
    """UID COPY or UID MOVE the selected message; report the destination only from COPYUID."""
    args = (codec.uid_set([ref.uid]), codec.mailbox_arg(destination))
    with outcome_on_error(unknown(ref)):
        response = await session.command(verb, *args, uid=True)
    mapping = single_copyuid(response, ref.uid)
    if mapping is None:
        return MutationResult(source=ref, status="accepted", warnings=[NO_MAPPING_WARNING])
    uid_validity, uid = mapping
    return MutationResult(
        source=ref,
        destination=Reference(folder=destination, uid_validity=uid_validity, uid=uid),
        status="copied" if verb == "COPY" else "moved",
    )


# --- operations -------------------------------------------------------------------------------


async def create_folder(pool: ImapPool, name: str) -> None:
    """CREATE one folder; a NO (it exists, say) is unavailable, a lost reply unknown."""
    arg = codec.mailbox_arg(name)
    async with pool.session() as session:
        await session.command("CREATE", arg)


async def rename_folder(pool: ImapPool, old: str, new: str) -> None:
    """RENAME one folder (every client sees it); never INBOX, checked by the input rules."""
    args = (codec.mailbox_arg(old), codec.mailbox_arg(new))
    async with pool.session() as session:
        await session.command("RENAME", *args)


async def copy_message(pool: ImapPool, ref: Reference, destination: str) -> MutationResult:
    """Copy one message; the destination reference comes only from a single-UID COPYUID."""
    with outcome_on_error(not_applied(ref)):
        async with pool.session() as session:
            await snapshot(session, ref, await select_for_write(session, ref))
            return await transfer(session, "COPY", ref, destination)


async def move_message(pool: ImapPool, ref: Reference, destination: str) -> MutationResult:
    """Move one message with the server's MOVE; without COPYUID the destination is unverified."""
    with outcome_on_error(not_applied(ref)):
        async with pool.session() as session:
            require_move(session)
            await snapshot(session, ref, await select_for_write(session, ref))
            return await transfer(session, "MOVE", ref, destination)


async def trash_message(pool: ImapPool, ref: Reference) -> MutationResult:
    """Move one message to the single folder the server advertises as \\Trash."""
    with outcome_on_error(not_applied(ref)):
        async with pool.session() as session:
            require_move(session)
            trash = await unique_role_folder(session, "trash")
            if trash == ref.folder or trash.upper() == ref.folder.upper() == "INBOX":
                raise InvalidArguments("the message is already in the Trash folder")
            await snapshot(session, ref, await select_for_write(session, ref))
            return await transfer(session, "MOVE", ref, trash)
