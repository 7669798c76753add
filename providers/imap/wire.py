"""aioimaplib's protocol as the session needs it: a read budget, bounded recursion, literals
handed over whole, untagged lines kept exactly as the server sent them, and SASL XOAUTH2."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aioimaplib import aioimaplib as _aio

log = logging.getLogger(__name__)

READ_BUDGET = 12 * 1024 * 1024  # bytes read from the wire per lease
_LINES_PER_FEED = 128  # keeps aioimaplib's one-frame-per-line recursion far from the limit
CRLF = b"\r\n"


class FetchReply(_aio.FetchCommand):  # type: ignore[misc]
    """aioimaplib's FetchCommand whose "is this message's answer complete?" check is linear.

    aioimaplib rescans every line received so far after each new line, which is quadratic in
    the messages one FETCH answers (a 100-summary page cost ~3 ms a call that way). Here each
    line is looked at once: the parenthesis depth since the last `n FETCH (` line is kept.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scanned = 0
        self._depth = 0

    def wait_data(self) -> bool:
        """Tell whether the current message's FETCH answer still has unclosed parentheses."""
        lines = self._resp_lines
        for index in range(self._scanned, len(lines)):
            line = lines[index]
            # Literal data arrives as a bytearray: its parentheses do not count (as upstream).
            if isinstance(line, bytes):
                if self.FETCH_MESSAGE_DATA_RE.match(line):
                    self._depth = 0
                self._depth += line.count(b"(") - line.count(b")")
        self._scanned = len(lines)
        return self._depth != 0


class WireProtocol(_aio.IMAP4ClientProtocol):  # type: ignore[misc]
    """aioimaplib's protocol with a read budget, bounded recursion and exact untagged lines."""

    incomplete_line: bytes  # aioimaplib's: the start of a line still missing its CRLF
    current_command: Any  # aioimaplib's: the command a literal or line belongs to, or None
    pending_sync_command: Any  # aioimaplib's: the sync command awaiting its tagged reply
    pending_async_commands: dict[str, Any]  # aioimaplib's: async commands by untagged name

    def __init__(self, loop: asyncio.AbstractEventLoop, read_budget: int = READ_BUDGET) -> None:
        super().__init__(loop, self._on_connection_lost)
        self.read_budget = read_budget
        self.lease_bytes = 0
        self.over_budget = False
        self.greeting: asyncio.Future[bytes] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        # The base64 SASL response of a pending AUTHENTICATE. It is kept out of the Command
        # object on purpose: aioimaplib puts a command's repr into log lines and exceptions.
        self._sasl_response: bytes | None = None
        self._sasl_inline = False
        self.sasl_challenged = False  # the server answered the response with a challenge

    def start_sasl(self, response: bytes, *, inline: bool) -> None:
        """Hold the SASL response for the next AUTHENTICATE: on its line (SASL-IR) or after `+`."""
        self._sasl_response = response
        self._sasl_inline = inline
        self.sasl_challenged = False

    def end_sasl(self) -> None:
        """Forget the SASL response, sent or not."""
        self._sasl_response = None
        self._sasl_inline = False

    def send(self, line: str, scrub: str | None = None) -> None:
        """Write a command line; an AUTHENTICATE line gets its SASL-IR appended, never logged."""
        command = self.pending_sync_command
        if (
            self._sasl_inline
            and self._sasl_response is not None
            and command is not None
            and command.name == "AUTHENTICATE"
        ):
            response, self._sasl_response = self._sasl_response, None
            self.transport.write(line.encode() + b" " + response + CRLF)
            return
        super().send(line, scrub=scrub)

    def _continuation(self, line: bytes) -> None:
        command = self.pending_sync_command
        if command is None or command.name != "AUTHENTICATE":
            super()._continuation(line)
            return
        # aioimaplib 2.0.3 only appends a continuation for AUTHENTICATE to the response and
        # waits, so a refused XOAUTH2 login (the server sends `+ <base64 error>` and waits for
        # the client) would hang until the timeout.
        if self._sasl_response is not None:  # no SASL-IR: this `+` asks for the response
            response, self._sasl_response = self._sasl_response, None
            self.transport.write(response + CRLF)
        elif not self.sasl_challenged:
            # A challenge after the response is the server's error report: answer once with
            # an empty response, and the server ends the command with its tagged NO.
            self.sasl_challenged = True
            self.transport.write(CRLF)
        else:  # a second challenge: the exchange is not XOAUTH2 as we know it
            self.transport.abort()

    async def execute_pair(self, first: Any, second: Any) -> tuple[Any, Any]:
        """Send a sync command and an async one right behind it, then await both replies.

        The server runs them in order, so the second's untagged answers follow the first's
        tagged reply; until then every untagged line belongs to the first.
        """
        if self.pending_sync_command is not None or self.pending_async_commands:
            raise _aio.Abort("another command is still pending")
        self.pending_sync_command = first
        self.pending_async_commands[second.untagged_resp_name] = second
        self.send(str(first))
        self.send(str(second))
        await first.wait()
        await second.wait()
        return first.response, second.response

    def data_received(self, data: bytes) -> None:
        """Count bytes against the budget, then feed aioimaplib a bounded number of lines."""
        self.lease_bytes += len(data)
        if self.lease_bytes > self.read_budget:
            self.over_budget = True
            if self.transport is not None:
                self.transport.abort()
            return
        # aioimaplib recurses once per response line and dies past ~990 lines in one read;
        # TCP may split anywhere, so feeding it in pieces is safe.
        # The bytes of a literal it takes whole, so a 5 MiB message body (in 8-byte header
        # lines, say) is handed over in one piece instead of being split line by line.
        start = 0
        while start < len(data):
            remaining = self._literal_remaining()
            end = start + remaining if remaining else self._after_lines(data, start)
            self._feed(data[start:end])
            start = end

    def _literal_remaining(self) -> int:
        """Return how many bytes of a literal aioimaplib still expects (0 outside one)."""
        command = self.current_command
        if command is None or not command.wait_literal_data():
            return 0
        return int(command._expected_size - len(command._resp_literal_data))

    @staticmethod
    def _after_lines(data: bytes, start: int) -> int:
        """Return the index after the next `_LINES_PER_FEED` line ends (or the end of data)."""
        position = start
        for _ in range(_LINES_PER_FEED):
            found = data.find(b"\r\n", position)
            if found < 0:
                return len(data)
            position = found + 2
        return position

    def _feed(self, data: bytes) -> None:
        # aioimaplib's own data_received, minus its debug line: that formats a repr of every
        # received byte even when debug logging is off.
        try:
            self._handle_responses(
                self.incomplete_line + data, self._handle_line, self.current_command
            )
            self.incomplete_line = b""
            self.current_command = None
        except _aio.IncompleteRead as incomplete:
            self.current_command = incomplete.cmd
            self.incomplete_line = incomplete.data

    def _on_connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if not self.greeting.done():
            self.greeting.set_exception(ConnectionError("closed before the greeting"))
            self.greeting.exception()  # mark retrieved: the session reports it as its own error

    def welcome(self, command: bytes) -> asyncio.Future[None]:
        """Record the greeting synchronously, so the next line is not taken as a greeting too."""
        # aioimaplib's own welcome() is a coroutine that also sends CAPABILITY (one round trip
        # we avoid by reading the greeting's [CAPABILITY] code).
        self.state = _aio.NONAUTH
        if not self.greeting.done():
            self.greeting.set_result(bytes(command))
        done: asyncio.Future[None] = self.loop.create_future()
        done.set_result(None)
        return done

    def _untagged_response(self, line: bytes) -> Any:
        # aioimaplib strips every b"* " in the line, corrupting names and subjects that hold
        # "* "; strip only the prefix, and keep the whole line for sync and async commands.
        line = line[2:] if line.startswith(b"* ") else line[1:]
        if self.pending_sync_command is not None:
            self.pending_sync_command.append_to_resp(line)
            return self.pending_sync_command
        match = _aio.message_data_re.match(line)
        name = match.group(1) if match else line.partition(b" ")[0]
        command = self.pending_async_commands.get(name.decode("ascii", "replace").upper())
        if command is None:
            command = self.pending_async_commands.get("NOOP")
        if command is not None:
            command.append_to_resp(line)
        else:
            log.debug("ignored an untagged %r response", name[:24])
        return command
