"""Dovecot's mailboxes as Graph's mailFolders: listing, naming by id or well-known name, changes.

Graph's tree hangs under a root (msgfolderroot) that no IMAP mailbox is; the top-level
mailboxes are its children and nested ones ("/"-separated) are childFolders.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from support.graph_double import ids
from support.graph_double.errors import GraphError, bad_request, not_found
from support.graph_double.imap import Session

SEPARATOR = "/"
FOLDER_EXISTS = "A folder with the specified name already exists."


@dataclass(frozen=True)
class Folder:
    """One IMAP mailbox as a Graph mailFolder (or the root, whose guid is "")."""

    guid: str
    name: str  # the decoded IMAP name, "/"-separated
    special: str | None  # "INBOX" or its special-use attribute ("\\Sent", ...), else None
    total: int
    unread: int
    children: int
    parent_guid: str = ""  # "" at the top level, whose parent is the root

    @property
    def id(self) -> str:
        """Its Graph id."""
        return ids.folder_id(self.guid) if self.guid else ids.root_id()

    @property
    def parent_id(self) -> str | None:
        """Its parent's Graph id (None for the root itself)."""
        if not self.guid:
            return None
        return ids.folder_id(self.parent_guid) if self.parent_guid else ids.root_id()

    @property
    def display_name(self) -> str:
        """Graph's name for a special folder, else the last part of the IMAP name."""
        if not self.guid:
            return "Top of Information Store"
        if self.special is not None:
            return ids.SPECIAL_DISPLAY_NAMES[self.special]
        return self.name.rpartition(SEPARATOR)[2]

    @property
    def parent_name(self) -> str | None:
        """The IMAP name of its parent, None at the top level."""
        return self.name.rpartition(SEPARATOR)[0] if SEPARATOR in self.name else None


ROOT = Folder(guid="", name="", special=None, total=0, unread=0, children=0)


async def list_folders(s: Session) -> list[Folder]:
    """Every mailbox with its counts and X-GUID, INBOX first, then by name."""
    listed = await s.mailboxes()
    unselectable = [name for attrs, name in listed if "\\noselect" in attrs]
    for name in unselectable:
        # Graph has no folder that cannot hold messages: make such a parent a real one.
        await s.create(ids.decode_mailbox(name))
    if unselectable:
        listed = await s.mailboxes()
    names = [ids.decode_mailbox(name) for _, name in listed]
    statuses = await s.statuses()
    found = []
    for attrs, wire in listed:
        name = ids.decode_mailbox(wire)
        special = "INBOX" if name.upper() == "INBOX" else None
        for use in ids.WELL_KNOWN.values():
            if use.lower() in attrs:
                special = use
        status = statuses.get(wire)
        if status is None:  # gone between the two commands
            continue
        found.append(
            Folder(
                guid=status["X-GUID"],
                name=name,
                special=special,
                total=int(status.get("MESSAGES", "0")),
                unread=int(status.get("UNSEEN", "0")),
                children=sum(1 for n in names if n.rpartition(SEPARATOR)[0] == name),
            )
        )
    guids = {f.name: f.guid for f in found}
    folders = [replace(f, parent_guid=guids.get(f.parent_name or "", "")) for f in found]
    folders.sort(key=lambda f: (f.name.upper() != "INBOX", f.name.lower()))
    return folders


async def resolve(s: Session, key: str) -> tuple[Folder, list[Folder]]:
    """The folder an id or well-known name names (404 when none), and every folder."""
    folders = await list_folders(s)
    lowered = key.lower()
    if lowered == ids.ROOT_NAME or key == ids.root_id():
        return replace(ROOT, children=len(children_of(ROOT, folders))), folders
    if lowered in ids.WELL_KNOWN:
        found = [f for f in folders if f.special == ids.WELL_KNOWN[lowered]]
    else:
        guid = ids.mailbox_guid(key)
        found = [f for f in folders if f.guid == guid]
    if not found:
        raise not_found()
    return found[0], folders


def children_of(parent: Folder, folders: list[Folder]) -> list[Folder]:
    """The direct children of `parent` (the top-level folders for the root)."""
    return [f for f in folders if f.parent_name == (parent.name if parent.guid else None)]


def _check_name(display_name: str) -> None:
    if not display_name.strip() or SEPARATOR in display_name:
        raise bad_request(f"This double cannot name a folder {display_name!r}.")


def _refuse_clash(folders: list[Folder], parent: Folder, name: str, own: str = "") -> None:
    others = [f for f in folders if f.guid != own]
    display = name.rpartition(SEPARATOR)[2].lower()
    if any(f.display_name.lower() == display for f in children_of(parent, others)) or any(
        f.name.lower() == name.lower() for f in others
    ):
        raise GraphError(409, "ErrorFolderExists", FOLDER_EXISTS)


async def create(s: Session, parent_key: str | None, display_name: str) -> Folder:
    """CREATE a child folder (409 ErrorFolderExists when one of that name is there)."""
    _check_name(display_name)
    parent, folders = await resolve(s, parent_key or ids.ROOT_NAME)
    name = display_name if not parent.guid else parent.name + SEPARATOR + display_name
    _refuse_clash(folders, parent, name)
    await s.create(name)
    return next(f for f in await list_folders(s) if f.name == name)


async def rename(s: Session, key: str, display_name: str) -> Folder:
    """RENAME a folder where it is (its id stays: Dovecot keeps the mailbox's X-GUID)."""
    _check_name(display_name)
    folder, folders = await resolve(s, key)
    if not folder.guid or folder.special is not None:
        raise GraphError(403, "ErrorAccessDenied", "A well-known folder keeps its name.")
    parent_name = folder.parent_name
    name = display_name if parent_name is None else parent_name + SEPARATOR + display_name
    if name != folder.name:
        parent = next((f for f in folders if f.name == parent_name), ROOT)
        _refuse_clash(folders, parent, name, own=folder.guid)
        await s.rename(folder.name, name)
    return next(f for f in await list_folders(s) if f.guid == folder.guid)
