"""The double's one IMAP connection to the real Dovecot, and a reader for the answers it needs.

aioimaplib hands back raw lines (a literal as its own bytearray after the line announcing it);
`parse_fetch` turns FETCH answers into dictionaries. One operation uses the connection at a time
(a lock), so each sees its own SELECT; a connection that failed is replaced by the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import aioimaplib
from aioimaplib.aioimaplib import Command

from support.graph_double.errors import GraphError
from support.graph_double.ids import MalformedId
from support.mailbox_names import quote_mailbox

FETCH_START = re.compile(rb"^(\d+) FETCH \(")
APPENDUID = re.compile(rb"\[APPENDUID \d+ (\d+)\]")
COPYUID = re.compile(rb"\[COPYUID \d+ [\d:,]+ ([\d:,]+)\]")
LIST_LINE = re.compile(rb'^\(([^)]*)\) (?:"[^"]*"|NIL) (.+)$')
ATOM_END = b' ()"'


class ImapFailure(RuntimeError):
    """Dovecot answered NO or BAD to a command the double relied on."""


def _quoted(data: bytes, i: int) -> tuple[bytes, int]:
    out = bytearray()
    i += 1
    while data[i : i + 1] != b'"':
        if data[i : i + 1] == b"\\":
            i += 1
        out += data[i : i + 1]
        i += 1
    return bytes(out), i + 1


def _atom(data: bytes, i: int) -> tuple[bytes, int]:
    start = i
    while i < len(data) and data[i : i + 1] not in (b" ", b"(", b")", b'"'):
        if data[i : i + 1] == b"[":  # BODY[HEADER.FIELDS (A B)] is one item name
            i = data.index(b"]", i)
        i += 1
    return data[start:i], i


def _tokens(pieces: Sequence[bytes]) -> list[Any]:
    """Nested lists of one FETCH answer's data: bytes for atoms, strings and literals."""
    root: list[Any] = []
    stack = [root]
    for n, piece in enumerate(pieces):
        if n % 2 == 1:  # a literal, announced by {size} at the end of the piece before
            stack[-1].append(bytes(piece))
            continue
        data, i = bytes(piece), 0
        while i < len(data):
            ch = data[i : i + 1]
            if ch == b" ":
                i += 1
            elif ch == b"(":
                stack[-1].append([])
                stack.append(stack[-1][-1])
                i += 1
            elif ch == b")":
                stack.pop()
                i += 1
                if len(stack) == 1:
                    return root
            elif ch == b'"':
                value, i = _quoted(data, i)
                stack[-1].append(value)
            elif ch == b"{" and data.endswith(b"}") and re.fullmatch(rb"\{\d+\}", data[i:]):
                break
            else:
                atom, i = _atom(data, i)
                stack[-1].append(None if atom == b"NIL" else atom)
    return root


def parse_fetch(lines: Sequence[bytes | bytearray]) -> list[dict[str, Any]]:
    """Each FETCH answer in `lines` as {item name (upper case): value}."""
    records: list[list[bytes]] = []
    for line in lines:
        if isinstance(line, bytearray):
            if records:
                records[-1].append(bytes(line))
        elif FETCH_START.match(line):
            records.append([line[line.index(b"(") :]])
        elif records and len(records[-1]) % 2 == 0:  # the rest of an answer after a literal
            records[-1].append(line)
    parsed = []
    for pieces in records:
        tokens = _tokens(pieces)
        items = tokens[0] if tokens and isinstance(tokens[0], list) else []
        parsed.append(
            {bytes(items[k]).decode().upper(): items[k + 1] for k in range(0, len(items) - 1, 2)}
        )
    return parsed


def parse_internaldate(value: bytes) -> datetime:
    """An INTERNALDATE ("05-Jan-2026 08:12:07 +0000") as an aware datetime."""
    return datetime.strptime(value.decode().strip(), "%d-%b-%Y %H:%M:%S %z")


def _ok(response: aioimaplib.Response, what: str) -> aioimaplib.Response:
    if response.result != "OK":
        raise ImapFailure(f"{what}: {response.result} {response.lines!r}")
    return response


class Session:
    """The connection while one operation holds it: the IMAP commands the store uses."""

    def __init__(self, client: aioimaplib.IMAP4_SSL) -> None:
        self.client = client
        self.selected: str | None = None

    async def select(self, name: str) -> None:
        """SELECT `name` unless it is selected already."""
        if self.selected != name:
            self.selected = None
            _ok(await self.client.select(quote_mailbox(name)), f"SELECT {name}")
            self.selected = name

    async def mailboxes(self) -> list[tuple[set[str], str]]:
        """(attributes, wire name) of every mailbox."""
        response = _ok(await self.client.list('""', '"*"'), "LIST")
        found = []
        for line in response.lines:
            m = LIST_LINE.match(bytes(line))
            if m is None:
                continue
            raw = m[2]
            name = _quoted(raw, 0)[0] if raw.startswith(b'"') else raw
            found.append(({a.lower() for a in m[1].decode().split()}, name.decode()))
        return found

    async def statuses(self) -> dict[str, dict[str, str]]:
        """Wire name → MESSAGES, UNSEEN and X-GUID of every selectable mailbox, in one command."""
        # LIST-STATUS (RFC 5819) answers with STATUS lines, which aioimaplib hands to a command
        # only when that command is the one expecting STATUS answers.
        protocol = self.client.protocol
        command = Command(
            "LIST",
            protocol.new_tag(),
            '""',
            '"*"',
            "RETURN",
            "(STATUS (MESSAGES UNSEEN X-GUID))",
            untagged_resp_name="STATUS",
            loop=protocol.loop,
        )
        response = _ok(await asyncio.wait_for(protocol.execute(command), 10), "LIST-STATUS")
        found = {}
        for line in response.lines:
            data = bytes(line)
            name, end = _quoted(data, 0) if data.startswith(b'"') else _atom(data, 0)
            items = re.findall(r"(MESSAGES|UNSEEN|X-GUID) ([^ )]+)", data[end:].decode())
            if items:
                found[name.decode()] = dict(items)
        return found

    async def fetch(self, uids: str, items: str, need: str) -> list[dict[str, Any]]:
        """UID FETCH `items` of `uids` (a UID set), parsed; answers without `need` left out."""
        # Dovecot may slip in FETCH answers nobody asked for (flags another session changed).
        response = _ok(await self.client.uid("fetch", uids, items), f"UID FETCH {uids}")
        return [r for r in parse_fetch(response.lines) if "UID" in r and need in r]

    async def search(self, *criteria: str) -> list[int]:
        """UID SEARCH."""
        response = _ok(await self.client.uid_search(*criteria, charset=None), "UID SEARCH")
        return [int(u) for u in bytes(response.lines[0]).split()] if response.lines else []

    async def append(self, name: str, message: bytes, flags: Sequence[str], when: datetime) -> int:
        """APPEND `message` to `name`; its new UID."""
        self.selected = None  # some servers answer an APPEND to the selected mailbox with EXISTS
        response = _ok(
            await self.client.append(
                message, mailbox=quote_mailbox(name), flags="(" + " ".join(flags) + ")", date=when
            ),
            f"APPEND {name}",
        )
        for line in response.lines:
            m = APPENDUID.search(bytes(line))
            if m:
                return int(m[1])
        raise ImapFailure(f"APPEND {name}: no APPENDUID in {response.lines!r}")

    async def store(self, uid: int, change: str, flags: str) -> None:
        """UID STORE `change` (+FLAGS or -FLAGS) `flags` on one message."""
        _ok(await self.client.uid("store", str(uid), change, f"({flags})"), "UID STORE")

    async def move(self, uid: int, destination: str) -> int:
        """UID MOVE one message; its UID in `destination`."""
        response = _ok(
            await self.client.uid("move", str(uid), quote_mailbox(destination)), "UID MOVE"
        )
        for line in response.lines:
            m = COPYUID.search(bytes(line))
            if m:
                return int(m[1])
        raise ImapFailure(f"UID MOVE: no COPYUID in {response.lines!r}")

    async def expunge(self, uid: int) -> None:
        """Delete one message for good: \\Deleted, then UID EXPUNGE of it alone."""
        await self.store(uid, "+FLAGS.SILENT", "\\Deleted")
        _ok(await self.client.uid("expunge", str(uid)), "UID EXPUNGE")

    async def create(self, name: str) -> None:
        """CREATE a mailbox."""
        _ok(await self.client.create(quote_mailbox(name)), f"CREATE {name}")

    async def rename(self, old: str, new: str) -> None:
        """RENAME a mailbox (its children move with it)."""
        if self.selected is not None:
            # Dovecot ends the session (BYE) when the selected mailbox is renamed under it.
            _ok(await self.client.examine("INBOX"), "EXAMINE INBOX")
            self.selected = None
        _ok(await self.client.rename(quote_mailbox(old), quote_mailbox(new)), f"RENAME {old}")


class Imap:
    """A login to one mailbox over IMAPS, lent to one operation at a time."""

    def __init__(
        self, host: str, port: int, user: str, password: str, context: ssl.SSLContext
    ) -> None:
        self._where = (host, port)
        self._login = (user, password)
        self._context = context
        self._lock = asyncio.Lock()
        self._session: Session | None = None

    async def _connect(self) -> Session:
        client = aioimaplib.IMAP4_SSL(
            host=self._where[0], port=self._where[1], timeout=10, ssl_context=self._context
        )
        await client.wait_hello_from_server()
        _ok(await client.login(*self._login), f"LOGIN {self._login[0]}")
        return Session(client)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        """The connection for one operation (a new one when the last one failed)."""
        async with self._lock:
            if self._session is None:
                self._session = await self._connect()
            try:
                yield self._session
            except (GraphError, ImapFailure, MalformedId):
                raise  # answers to give, on a connection still in a known state
            except BaseException:
                self._abandon()
                raise

    def _abandon(self) -> None:
        session, self._session = self._session, None
        transport = getattr(getattr(session, "client", None), "protocol", None)
        if transport is not None and transport.transport is not None:
            transport.transport.close()

    async def close(self) -> None:
        """LOGOUT (or just hang up, when the server does not answer soon)."""
        async with self._lock:
            if self._session is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._session.client.logout(), 2)
            self._abandon()
