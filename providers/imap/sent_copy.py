"""The provider's own copy of a sent message: found by exact Message-ID in the \\Sent folders.

Providers such as Gmail file every message they accept in the Sent folder themselves, so a copy
there with the Message-ID of a send is evidence that the provider took it. Everything here reads
only: the folders come from LIST special-use attributes (never from a name), each is opened
with EXAMINE, and messages are read with BODY.PEEK. `UID SEARCH HEADER Message-ID` matches
substrings, so every hit is confirmed from its own Message-ID field before it counts.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from msgspec import Struct

from providers.imap import codec
from providers.imap.conversation import LinkSection, select_verified
from providers.imap.discovery import list_folders, special_folders
from providers.imap.fetch import body_section, number, parse_fetch
from providers.imap.responses import Atom
from providers.imap.session import ImapSession
from providers.mailbox import RAW_PREFIX, SentCopy
from providers.off_loop import off_loop
from schemas.errors import InvalidArguments
from schemas.ledger_events import MAX_MESSAGE_ID_BYTES, MESSAGE_ID_PATTERN

# Hits verified per folder, newest first: a real copy is one or two messages, and each hit
# costs one header section of at most 64 KiB of the session's read budget.
MAX_CANDIDATES: Final = 32
MAX_COPIES: Final = 4  # confirmed copies whose bytes are read and hashed, over all folders
_MESSAGE_ID_FIELD: Final = ("MESSAGE-ID",)
_MESSAGE_ID: Final = re.compile(MESSAGE_ID_PATTERN, re.ASCII)


class Candidate(Struct, frozen=True):
    """A message whose own Message-ID field is exactly the one searched for."""

    folder: str
    uid_validity: int
    uid: int


def checked_message_id(message_id: str) -> str:
    """Return the Message-ID when it is one angelos writes (`<local@domain>`), else refuse."""
    if len(message_id) > MAX_MESSAGE_ID_BYTES or _MESSAGE_ID.fullmatch(message_id) is None:
        raise InvalidArguments("the Message-ID is not one a send carries")
    return message_id


async def sent_folders(session: ImapSession) -> list[str]:
    """Every selectable folder the server marks \\Sent (several stay several; none is none)."""
    return special_folders(await list_folders(session)).get("sent", [])


async def find_candidates(session: ImapSession, message_id: str) -> list[Candidate]:
    """Search every \\Sent folder for the Message-ID and keep the hits that carry it exactly."""
    wanted = checked_message_id(message_id)
    bare = wanted[1:-1]

    def exact(links: LinkSection) -> bool:
        # Exactly one Message-ID field holding exactly this ID: a longer ID that contains it,
        # or a second ID beside it, is another message.
        return links.get("MESSAGE-ID") == [bare]

    found: list[Candidate] = []
    for folder in await sent_folders(session):
        selected = await session.examine(folder)
        if selected.exists == 0:
            continue
        hits = await session.uid_search(
            codec.atom("HEADER"), codec.atom("MESSAGE-ID"), codec.quote(wanted)
        )
        newest = sorted(set(hits), reverse=True)[:MAX_CANDIDATES]
        if not newest:
            continue
        confirmed, _ = await select_verified(
            session, newest, MAX_COPIES - len(found), _MESSAGE_ID_FIELD, exact,
            enforce_limits=False,
        )  # fmt: skip
        found += [Candidate(folder, selected.uid_validity, uid) for uid in confirmed]
        if len(found) >= MAX_COPIES:
            break
    return found


async def read_copy(session: ImapSession, candidate: Candidate) -> SentCopy | None:
    """Read one confirmed copy's bytes (BODY.PEEK, at most 5 MiB + 1) and hash them.

    None when the copy is gone or its folder was renumbered (another UIDVALIDITY) since.
    """
    selected = await session.examine(candidate.folder)
    if selected.uid_validity != candidate.uid_validity:
        return None
    items = f"(UID RFC822.SIZE BODY.PEEK[]<0.{RAW_PREFIX + 1}>)"
    response = await session.uid_fetch([candidate.uid], codec.raw(items))
    for attrs in parse_fetch(response):
        if attrs.get("UID") != Atom(str(candidate.uid)):
            continue
        raw = body_section(attrs, "BODY[]")
        if raw is None:
            continue  # an unsolicited flag update; the real response carries the body
        size = number(attrs, "RFC822.SIZE")
        whole = size == len(raw) <= RAW_PREFIX
        digest = await off_loop(_sha256, raw) if whole else None
        return SentCopy(
            folder=candidate.folder,
            uid_validity=candidate.uid_validity,
            uid=candidate.uid,
            size=size,
            sha256=digest,
        )
    return None


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
