"""A scripted IMAP peer in memory: each command is answered from a table of reply makers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from providers.imap.session import ImapSession
from providers.imap.wire import WireProtocol
from schemas.secret import Secret
from support.scripted_wire import ScriptedTransport

GREETING = b"* OK [CAPABILITY IMAP4rev1 LITERAL+ AUTH=PLAIN] ready\r\n"
LOGGED_IN = b"OK [CAPABILITY IMAP4rev1 LITERAL+ MOVE UIDPLUS CONDSTORE SPECIAL-USE] Logged in"
EXAMINE = b"* FLAGS (\\Seen)\r\n* 3 EXISTS\r\n* OK [UIDVALIDITY 7] ok\r\n* OK [UIDNEXT 4] ok\r\n"

# A reply maker gets (tag, command line) and returns the bytes to send, or None for silence.
Reply = Callable[[str, str], bytes | None]


class Peer(ScriptedTransport):
    """A fake transport whose far end answers each command from a table of reply makers."""

    def __init__(self, replies: dict[str, Reply]) -> None:
        super().__init__()
        self.replies = replies
        self.written: list[bytes] = []
        self.commands: list[str] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        raw = bytes(data)
        self.written.append(raw)
        tag, _, rest = raw.decode("utf-8").partition(" ")
        name = rest.split(" ", 1)[0].strip().upper()
        if name == "UID":
            name = "UID " + rest.split(" ", 2)[1].upper()
        self.commands.append(name)
        make = self.replies.get(name, lambda t, _: f"{t} OK done\r\n".encode())
        reply = make(tag, rest)
        if reply is not None:
            self.feed(reply)


def tagged(status: bytes, untagged: bytes = b"") -> Reply:
    return lambda tag, _: untagged + tag.encode() + b" " + status + b"\r\n"


def silent(tag: str, line: str) -> None:
    return None


async def open_session(
    replies: dict[str, Reply] | None = None,
    *,
    greeting: bytes = GREETING,
    timeout_s: float = 1.0,
    read_budget: int = 12 * 1024 * 1024,
    login: bool = True,
) -> tuple[ImapSession, Peer]:
    table: dict[str, Reply] = {"LOGIN": tagged(LOGGED_IN), "EXAMINE": tagged(b"OK", EXAMINE)}
    table.update(replies or {})
    peer = Peer(table)
    wire = WireProtocol(asyncio.get_running_loop(), read_budget=read_budget)
    peer.wire = wire
    wire.connection_made(peer)
    session = ImapSession(peer, wire, timeout_s)
    peer.feed(greeting)
    await session.handshake()
    if login:
        await session.login("alice@example.test", Secret("alicepw"))
    return session, peer
