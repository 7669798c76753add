"""Folder listing and the server capability report."""

from __future__ import annotations

from collections.abc import Iterable

from providers.imap import codec, responses
from providers.imap.session import ImapSession
from providers.imap.settings import ImapSettings
from schemas.errors import SafetyLimit
from schemas.mailbox import SPECIAL_USE_ROLES, Folder, ServerCapabilities

MAX_FOLDERS = 1000
MAX_CAPABILITIES = 1000
GMAIL_IMAP_HOSTS = frozenset({"imap.gmail.com", "imap.googlemail.com"})
_NOT_SELECTABLE = frozenset({"\\NOSELECT", "\\NONEXISTENT"})


async def list_folders(session: ImapSession) -> list[Folder]:
    """LIST "" "*" (RETURN (SPECIAL-USE) when advertised), in server order."""
    args = [codec.quote(""), codec.quote("*")]
    if "SPECIAL-USE" in session.capabilities:
        args += [codec.atom("RETURN"), codec.raw("(SPECIAL-USE)")]
    response = await session.command("LIST", *args)
    found = responses.list_responses(response)
    if len(found) > MAX_FOLDERS:
        raise SafetyLimit(f"the server lists more than {MAX_FOLDERS} folders")
    return [responses.parse_list_response(segments) for segments in found]


def special_folders(folders: Iterable[Folder]) -> dict[str, list[str]]:
    """Map each special-use role to the sorted names of selectable folders carrying it."""
    roles: dict[str, set[str]] = {}
    for folder in folders:
        attributes = {a.upper() for a in folder.attributes}
        if attributes & _NOT_SELECTABLE:
            continue
        for attribute in attributes:
            role = SPECIAL_USE_ROLES.get(attribute)
            if role is not None:
                roles.setdefault(role, set()).add(folder.name)
    # Several folders for one role stay listed: ambiguity is reported, never resolved.
    return {role: sorted(names) for role, names in sorted(roles.items())}


def is_gmail(settings: ImapSettings, capabilities: frozenset[str]) -> bool:
    """Tell whether Gmail label semantics apply (preset, Gmail IMAP host or X-GM-EXT-1)."""
    return (
        settings.gmail_config
        or settings.host.rstrip(".").lower() in GMAIL_IMAP_HOSTS
        or "X-GM-EXT-1" in capabilities
    )


async def server_capabilities(session: ImapSession, settings: ImapSettings) -> ServerCapabilities:
    """Build the `server` object of the capabilities action from CAPABILITY and LIST."""
    atoms = session.capability_atoms
    if len(atoms) > MAX_CAPABILITIES:
        raise SafetyLimit(f"the server advertises more than {MAX_CAPABILITIES} capabilities")
    imap = sorted({cleaned for a in atoms if (cleaned := codec.clean_text(a))})
    special = special_folders(await list_folders(session))
    caps = session.capabilities
    gmail = is_gmail(settings, caps)
    uid_expunge = "UIDPLUS" in caps
    return ServerCapabilities(
        imap=imap,
        move="MOVE" in caps,
        uid_expunge=uid_expunge,
        condstore="CONDSTORE" in caps,
        special_use="SPECIAL-USE" in caps or bool(special),
        special_folders=special,
        gmail_labels=gmail,
        permanent_delete=uid_expunge and not gmail,
        smtp_stores_sent=settings.smtp_stores_sent,
    )
