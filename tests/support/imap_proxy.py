"""A loopback IMAPS proxy that sees the commands: a wire-side witness and a server that differs.

It terminates TLS with the per-run test server certificate (so the product verifies it exactly
as it verifies Dovecot), opens its own verified TLS connection to Dovecot for every client
connection, and forwards both directions line by line, literals byte for byte. On the way it
can

* record every client command (`commands`, e.g. "SELECT", "UID MOVE") and its first line
  without the tag (`lines`, LOGIN arguments redacted) - the proof of what reached the mailbox;
* make the server look different: hide capability atoms (`hide_capabilities`), remove response
  codes such as COPYUID (`strip_codes`), or rewrite any other line (`rewrite`);
* run an awaited hook just before a command is forwarded (`before`), e.g. a second IMAP client
  changing flags between the product's read and its conditional STORE;
* lose a reply (`cut_after`): forward the command, let Dovecot execute and answer it, then drop
  both connections instead of passing the tagged answer on - a mutation whose outcome the
  product cannot know.

Dovecot itself is never reconfigured, so tests running in parallel against it are unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType

from support.services import Services

_LITERAL = re.compile(rb"\{(\d+)\+?\}\r\n$")
_LIMIT = 1 << 20  # longest line either side may send (literals are read by size, not by line)


def command_name(line: bytes) -> tuple[bytes, str] | None:
    """Return (tag, command name) of a command's first line; "UID X" for UID commands."""
    words = line.rstrip(b"\r\n").split(b" ", 3)
    if len(words) < 2:
        return None
    name = words[1].decode("ascii", "replace").upper()
    if name == "UID" and len(words) > 2:
        name = "UID " + words[2].decode("ascii", "replace").upper()
    return words[0], name


class ImapProxy:
    """Forward 127.0.0.1:<port> to the test Dovecot over TLS, recording and steering IMAP."""

    def __init__(
        self,
        services: Services,
        *,
        hide_capabilities: Iterable[str] = (),
        strip_codes: Iterable[str] = (),
        rewrite: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.services = services
        self.hidden = [atom.upper().encode() for atom in hide_capabilities]
        self.strip_codes = [code.upper().encode() for code in strip_codes]
        self.rewrite = rewrite
        self.before: dict[str, Callable[[], Awaitable[None]]] = {}
        self.cut_after: set[str] = set()
        self.commands: list[str] = []
        self.lines: list[str] = []
        self.connections = 0
        self.cuts = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # --- what the tests read ----------------------------------------------------------------

    def snapshot(self) -> tuple[int, int]:
        """Return (connections, commands) so far."""
        return self.connections, len(self.commands)

    def count(self, *names: str) -> int:
        """Count the recorded commands with any of these names."""
        wanted = {n.upper() for n in names}
        return sum(1 for c in self.commands if c in wanted)

    def since(self, mark: int) -> list[str]:
        """Return the command names recorded after `mark` (a len(commands) taken earlier)."""
        return self.commands[mark:]

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> ImapProxy:
        tls_dir = self.services.dir / "tls"
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, ssl=self._tls, ssl_handshake_timeout=10, limit=_LIMIT
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    # --- forwarding -------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.services.imap_host,
                self.services.imap_port,
                ssl=self.services.ssl_context(),
                server_hostname="localhost",
                limit=_LIMIT,
            )
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        cut: dict[str, bytes] = {}
        links = (writer, up_writer)
        try:
            await asyncio.gather(
                self._upstream(reader, up_writer, cut),
                self._downstream(up_reader, writer, cut, links),
            )
        except (OSError, ValueError, asyncio.IncompleteReadError):
            pass  # a peer went away (or a cut): both sides are aborted below
        finally:
            for w in links:
                with contextlib.suppress(Exception):
                    w.transport.abort()
            self._tasks.discard(task)

    async def _upstream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cut: dict[str, bytes]
    ) -> None:
        continuing = False  # the next line continues a command after a literal
        while line := await reader.readline():
            if not continuing and (named := command_name(line)) is not None:
                tag, name = named
                self.commands.append(name)
                text = line[len(tag) + 1 :].rstrip(b"\r\n").decode("utf-8", "replace")
                self.lines.append("LOGIN <redacted>" if name == "LOGIN" else text)
                hook = self.before.pop(name, None)
                if hook is not None:
                    await hook()
                if name in self.cut_after:
                    cut["tag"] = tag
            writer.write(line)
            literal = _LITERAL.search(line)
            if literal:
                writer.write(await reader.readexactly(int(literal[1])))
            continuing = literal is not None
            await writer.drain()
        writer.close()

    async def _downstream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        cut: dict[str, bytes],
        links: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        while line := await reader.readline():
            tag = cut.get("tag")
            if tag is not None and line.startswith(tag + b" "):
                # Dovecot has executed and answered the command; the client never hears it.
                self.cuts += 1
                for w in links:
                    w.transport.abort()
                return
            literal = _LITERAL.search(line)
            if literal:
                writer.write(line + await reader.readexactly(int(literal[1])))
            else:
                writer.write(self._rewritten(line))
            await writer.drain()
        writer.close()

    def _rewritten(self, line: bytes) -> bytes:
        if self.hidden and b"CAPABILITY " in line.upper():
            for atom in self.hidden:
                line = re.sub(rb"(?i) " + re.escape(atom) + rb"(?=[ \]\r])", b"", line)
        for code in self.strip_codes:
            line = re.sub(rb"(?i)\[" + re.escape(code) + rb"(?: [^\]]*)?\] ?", b"", line)
        if self.rewrite is not None:
            line = self.rewrite(line)
        return line
