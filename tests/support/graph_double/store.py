"""The double's mailbox state, which lives in the real Dovecot: folders and messages by Graph id.

Every operation holds the one IMAP connection for its whole length, so each sees the mailbox as
its own commands left it. A message is found by its X-GUID (see ids.py): first in the folder it
was last seen in, then in every folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from support.graph_double import folders, ids
from support.graph_double.errors import bad_request, not_found
from support.graph_double.folders import Folder
from support.graph_double.imap import Imap, Session, parse_internaldate

SUMMARY_ITEMS = "(UID FLAGS INTERNALDATE X-GUID BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])"
DETAIL_ITEMS = (
    "(UID FLAGS INTERNALDATE X-GUID MODSEQ RFC822.SIZE PREVIEW BODYSTRUCTURE BODY.PEEK[HEADER])"
)


@dataclass(frozen=True)
class Summary:
    """What filtering and ordering a folder's messages needs."""

    uid: int
    guid: str
    flags: frozenset[str]
    received: datetime
    internet_message_id: str | None


@dataclass(frozen=True)
class Detail:
    """Everything a message's JSON is made from (the body itself stays in Dovecot)."""

    folder: Folder
    uid: int
    guid: str
    flags: frozenset[str]
    received: datetime
    modseq: int
    size: int
    preview: str
    has_attachments: bool
    header: bytes


def _text(value: Any) -> str:
    return bytes(value).decode("utf-8", "replace") if value is not None else ""


def _flags(value: Any) -> frozenset[str]:
    return frozenset(_text(f).lower() for f in value or [] if f is not None)


def _has_attachment(structure: Any) -> bool:
    """Whether any part of a BODYSTRUCTURE has an attachment disposition."""
    if not isinstance(structure, list):
        return False
    for item in structure:
        if isinstance(item, list):
            if item and isinstance(item[0], bytes) and item[0].lower() == b"attachment":
                return True
            if _has_attachment(item):
                return True
    return False


def _message_id_header(raw: Any) -> str | None:
    m = re.search(rb"(?im)^message-id:\s*(<[^>\r\n]*>)", bytes(raw or b""))
    return m[1].decode("utf-8", "replace") if m else None


class Store:
    """Folders and messages of one Dovecot mailbox, addressed the way Graph addresses them."""

    def __init__(self, imap: Imap) -> None:
        self.imap = imap
        self._last_seen: dict[str, str] = {}  # message X-GUID → IMAP name it was last seen in

    async def folder(self, key: str) -> Folder:
        """The folder an id or well-known name names (404 when none)."""
        async with self.imap.session() as s:
            return (await folders.resolve(s, key))[0]

    async def children(self, key: str | None) -> list[Folder]:
        """The direct children of a folder (of the root when `key` is None)."""
        async with self.imap.session() as s:
            parent, every = await folders.resolve(s, key or ids.ROOT_NAME)
        return folders.children_of(parent, every)

    async def create_folder(self, parent_key: str | None, display_name: str) -> Folder:
        """CREATE a child folder (409 ErrorFolderExists when one of that name is there)."""
        async with self.imap.session() as s:
            return await folders.create(s, parent_key, display_name)

    async def rename_folder(self, key: str, display_name: str) -> Folder:
        """RENAME a folder where it is; its id stays."""
        async with self.imap.session() as s:
            return await folders.rename(s, key, display_name)

    async def _target(self, s: Session, key: str) -> Folder:
        folder = (await folders.resolve(s, key))[0]
        if not folder.guid:
            raise bad_request("The root folder holds no messages.")
        return folder

    async def summaries(self, key: str) -> tuple[Folder, list[Summary]]:
        """The folder and what filtering and ordering needs of each message in it."""
        async with self.imap.session() as s:
            folder = (await folders.resolve(s, key))[0]
            if not folder.guid:
                return folder, []
            await s.select(folder.name)
            records = await s.fetch("1:*", SUMMARY_ITEMS, "X-GUID") if folder.total else []
        found = []
        for r in records:
            guid = _text(r["X-GUID"])
            self._last_seen[guid] = folder.name
            found.append(
                Summary(
                    uid=int(r["UID"]),
                    guid=guid,
                    flags=_flags(r.get("FLAGS")),
                    received=parse_internaldate(r["INTERNALDATE"]),
                    internet_message_id=_message_id_header(
                        r.get("BODY[HEADER.FIELDS (MESSAGE-ID)]")
                    ),
                )
            )
        return folder, found

    async def details(self, folder: Folder, uids: list[int]) -> list[Detail]:
        """The details of these messages of `folder`, in the order given (gone ones left out)."""
        if not uids:
            return []
        async with self.imap.session() as s:
            await s.select(folder.name)
            by_uid = {d.uid: d for d in await self._details(s, folder, ",".join(map(str, uids)))}
        return [by_uid[u] for u in uids if u in by_uid]

    async def _details(self, s: Session, folder: Folder, uids: str) -> list[Detail]:
        found = []
        for r in await s.fetch(uids, DETAIL_ITEMS, "X-GUID"):
            modseq = r.get("MODSEQ") or [b"0"]
            found.append(
                Detail(
                    folder=folder,
                    uid=int(r["UID"]),
                    guid=_text(r["X-GUID"]),
                    flags=_flags(r.get("FLAGS")),
                    received=parse_internaldate(r["INTERNALDATE"]),
                    modseq=int(modseq[0]),
                    size=int(r.get("RFC822.SIZE") or 0),
                    preview=_text(r.get("PREVIEW")),
                    has_attachments=_has_attachment(r.get("BODYSTRUCTURE")),
                    header=bytes(r.get("BODY[HEADER]") or b""),
                )
            )
            self._last_seen[found[-1].guid] = folder.name
        return found

    async def _locate(self, s: Session, graph_id: str) -> tuple[Folder, int]:
        guid = ids.message_guid(graph_id)
        hint = self._last_seen.get(guid)
        for folder in sorted(await folders.list_folders(s), key=lambda f: f.name != hint):
            if not folder.total:
                continue
            await s.select(folder.name)
            uids = await s.search("X-GUID", guid)
            if uids:
                self._last_seen[guid] = folder.name
                return folder, uids[0]
        raise not_found()

    async def _detail(self, s: Session, folder: Folder, uid: int) -> Detail:
        await s.select(folder.name)
        found = await self._details(s, folder, str(uid))
        if not found:
            raise not_found()
        return found[0]

    async def message(self, graph_id: str) -> Detail:
        """One message by its id."""
        async with self.imap.session() as s:
            folder, uid = await self._locate(s, graph_id)
            return await self._detail(s, folder, uid)

    async def raw(self, graph_id: str) -> bytes:
        """The exact MIME of a message."""
        async with self.imap.session() as s:
            uid = (await self._locate(s, graph_id))[1]
            records = await s.fetch(str(uid), "(UID BODY.PEEK[])", "BODY[]")
        if not records:
            raise not_found()
        return bytes(records[0]["BODY[]"])

    async def append(self, key: str, mime: bytes, flags: list[str]) -> Detail:
        """APPEND a new message (now as its received time) to a folder; its details."""
        async with self.imap.session() as s:
            folder = await self._target(s, key)
            uid = await s.append(folder.name, mime, flags, datetime.now(UTC))
            return await self._detail(s, folder, uid)

    async def set_flags(self, graph_id: str, changes: dict[str, bool]) -> Detail:
        """Set or clear IMAP flags ({"\\Seen": True, ...}) on one message."""
        async with self.imap.session() as s:
            folder, uid = await self._locate(s, graph_id)
            for flag, on in changes.items():
                await s.store(uid, "+FLAGS.SILENT" if on else "-FLAGS.SILENT", flag)
            return await self._detail(s, folder, uid)

    async def move(self, graph_id: str, destination: str) -> Detail:
        """UID MOVE: the message keeps its X-GUID, so its id."""
        async with self.imap.session() as s:
            source, uid = await self._locate(s, graph_id)
            target = await self._target(s, destination)
            await s.select(source.name)
            new_uid = await s.move(uid, target.name)
            target = await self._target(s, destination)  # its counts have changed
            return await self._detail(s, target, new_uid)

    async def copy(self, graph_id: str, destination: str) -> Detail:
        """FETCH and APPEND (not IMAP COPY, which would keep the X-GUID): a new message, new id."""
        async with self.imap.session() as s:
            source, uid = await self._locate(s, graph_id)
            target = await self._target(s, destination)
            await s.select(source.name)
            found = await s.fetch(str(uid), "(UID FLAGS INTERNALDATE BODY.PEEK[])", "BODY[]")
            if not found:
                raise not_found()
            record = found[0]
            keep = [_text(f) for f in record.get("FLAGS") or [] if _text(f).lower() != "\\recent"]
            when = parse_internaldate(record["INTERNALDATE"])
            new_uid = await s.append(target.name, bytes(record["BODY[]"]), keep, when)
            target = await self._target(s, destination)
            return await self._detail(s, target, new_uid)

    async def delete(self, graph_id: str) -> None:
        """Take a message out of its folder for good."""
        async with self.imap.session() as s:
            folder, uid = await self._locate(s, graph_id)
            await s.select(folder.name)
            await s.expunge(uid)
