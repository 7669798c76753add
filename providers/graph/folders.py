"""Graph folders: listed breadth first through childFolders, and the well-known ones by role."""

from __future__ import annotations

import asyncio
import re
from typing import Final

from providers.graph.account import PROVIDER
from providers.graph.answers import get, read_body
from providers.graph.http import ME, GraphHttp
from providers.graph.wire import FolderPage, MailFolder, decode
from schemas import errors
from schemas.mailbox import Folder, ServerCapabilities

MAX_FOLDERS: Final = 5000
PAGE: Final = "100"
_FIELDS: Final = "id,displayName,parentFolderId,childFolderCount,isHidden"
GRAPH_ID: Final = re.compile(r"[A-Za-z0-9_=-]{1,1024}")
# Graph's well-known folder names, keyed the way capabilities reports them (Graph's own roles,
# not the IMAP role names).
WELL_KNOWN: Final = {
    "\\Inbox": "inbox",
    "\\Drafts": "drafts",
    "\\Sent": "sentitems",
    "\\Trash": "deleteditems",
    "\\Archive": "archive",
}
SUPPORTED_FLAGS: Final = ["\\Seen", "\\Flagged"]
CAPABILITY_WARNING: Final = (
    "Microsoft Graph: message and folder IDs are opaque (pass references back whole); there is "
    "no MODSEQ (unchanged_since), no conversation and no permanent delete; only \\Seen and "
    "\\Flagged can change; Microsoft files sent messages in Sent Items itself"
)


def folder_path(folder: str) -> str:
    """The URL of one folder by native ID or well-known name (the name already checked)."""
    if GRAPH_ID.fullmatch(folder) is None:
        raise errors.InvalidArguments(
            "a Microsoft Graph folder is named by its ID (from folders) or a well-known name"
        )
    return f"{ME}/mailFolders/{folder}"


async def list_folders(http: GraphHttp) -> list[Folder]:
    """Every visible folder, breadth first: the top level, then each level's children."""
    roles = await special_folders(http)
    role_of = {ids[0]: role for role, ids in roles.items()}
    found: list[Folder] = []
    level = [f"{ME}/mailFolders"]
    while level:
        below: list[str] = []
        for collection in level:
            for folder in await _collection(http, collection):
                if len(found) >= MAX_FOLDERS:
                    raise errors.SafetyLimit(f"the mailbox has more than {MAX_FOLDERS} folders")
                role = role_of.get(folder.id)
                found.append(
                    Folder(
                        name=folder.id,
                        delimiter="",
                        attributes=[role] if role else [],
                        display_name=folder.display_name,
                    )
                )
                if folder.child_folder_count:
                    below.append(f"{ME}/mailFolders/{folder.id}/childFolders")
        level = below
    return found


async def _collection(http: GraphHttp, url: str) -> list[MailFolder]:
    """Every visible folder of one collection, following @odata.nextLink within it only."""
    folders: list[MailFolder] = []
    params: dict[str, str] | None = {"$top": PAGE, "$select": _FIELDS}
    link: str | None = url
    while link is not None:
        page = decode(read_body(await get(http, link, params)), FolderPage)
        for folder in page.value:
            if GRAPH_ID.fullmatch(folder.id) is None:
                raise errors.ServiceUnavailable("Microsoft Graph sent a malformed folder ID")
            if not folder.is_hidden:
                folders.append(folder)
        link, params = same_collection(page.next_link, url), None
    return folders


def same_collection(link: str | None, collection: str) -> str | None:
    """A next link to follow, refused unless it pages the same collection on the pinned host."""
    if link is None:
        return None
    if not link.startswith(collection + "?"):
        raise errors.ServiceUnavailable("Microsoft Graph's next page link leaves the collection")
    return link


async def special_folders(http: GraphHttp) -> dict[str, list[str]]:
    """The native IDs of the well-known folders this mailbox has, keyed by Graph role."""

    async def one(name: str) -> str | None:
        answer = await get(http, f"{ME}/mailFolders/{name}", {"$select": "id"})
        if answer.status == 404:
            return None  # e.g. no archive folder yet
        folder = decode(read_body(answer), MailFolder)
        if GRAPH_ID.fullmatch(folder.id) is None:
            raise errors.ServiceUnavailable("Microsoft Graph sent a malformed folder ID")
        return folder.id

    ids = await asyncio.gather(*(one(name) for name in WELL_KNOWN.values()))
    return {role: [id_] for role, id_ in zip(WELL_KNOWN, ids, strict=True) if id_ is not None}


async def capabilities(http: GraphHttp) -> ServerCapabilities:
    """What Graph supports, its special folders, and what it cannot do."""
    return ServerCapabilities(
        imap=[],
        move=True,
        uid_expunge=False,
        condstore=False,
        special_use=True,
        special_folders=await special_folders(http),
        gmail_labels=False,
        permanent_delete=False,
        smtp_stores_sent=True,
        provider=PROVIDER,
        supported_flags=list(SUPPORTED_FLAGS),
        warnings=[CAPABILITY_WARNING],
    )
