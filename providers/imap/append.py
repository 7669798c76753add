"""APPEND to a special-use folder found by role (Sent filing now; drafts later)."""

from __future__ import annotations

from providers.imap import responses
from providers.imap.discovery import list_folders, special_folders
from providers.imap.session import ImapSession
from providers.mailbox import Appended
from schemas.errors import UnsupportedOperation

MAX_APPEND_BYTES = 5 * 1024 * 1024


async def unique_role_folder(session: ImapSession, role: str) -> str:
    """Return the single selectable folder carrying a special-use role; never guess."""
    names = special_folders(await list_folders(session)).get(role, [])
    if len(names) != 1:
        raise UnsupportedOperation(f"no unique {role} folder is advertised by the server")
    return names[0]


async def append_to_role(
    session: ImapSession, role: str, raw: bytes, flags: tuple[str, ...]
) -> Appended:
    """APPEND raw to the role's folder; a lost reply is OutcomeUnknown, a NO is unavailable."""
    if not raw or len(raw) > MAX_APPEND_BYTES:
        raise UnsupportedOperation("the message is empty or larger than 5 MiB")
    folder = await unique_role_folder(session, role)
    response = await session.append(folder, raw, flags=flags)
    mapping = responses.parse_appenduid(response)
    if mapping is None or len(mapping.uids) != 1:
        return Appended(folder)
    return Appended(folder, mapping.uid_validity, mapping.uids[0])
