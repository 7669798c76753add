"""stdin/stdout as non-blocking asyncio pipes, for mcp's stdio_server without worker threads.

The SDK's default wraps blocking file objects with anyio.wrap_file, so every line read, write
and flush is a hop to a worker thread: about half a millisecond per tool call on this machine
(bench/read_path.py). When both descriptors are pipes or sockets, these objects give the SDK
the same interface (`async for line`, `write`, `flush`) on the event loop itself. Terminals and
files keep the SDK's own handling: a terminal's non-blocking mode would outlive this process in
the user's shell.
Like the SDK, serving diverts fd 0 to the null device and fd 1 to stderr, so stray output of
any library never reaches the wire; both are restored on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Final

MAX_LINE: Final = 256 * 1024 * 1024  # one JSON-RPC message; larger lines are refused, not kept
_UNREADABLE: Final = "\n"  # handed on for an over-long line: the SDK reports a parse error


class PipeLines:
    """The lines of the client's pipe, decoded as UTF-8 (invalid bytes replaced)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # EOF: a last line without newline, or none
            if not exc.partial:
                raise StopAsyncIteration from None
            line = exc.partial
        except asyncio.LimitOverrunError as exc:  # longer than MAX_LINE: skip it, keep serving
            await self._skip_line(exc.consumed)
            return _UNREADABLE
        return line.decode("utf-8", "replace")

    async def _skip_line(self, buffered: int) -> None:
        while True:
            await self._reader.readexactly(buffered)
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError as exc:
                buffered = exc.consumed


class PipeWriter:
    """Writes whole lines to the client's pipe; flush waits while the pipe is full."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        """Queue text for the pipe."""
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Wait until the pipe has room again (backpressure from a slow client)."""
        await self._writer.drain()


async def _connect() -> (
    tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.ReadTransport] | None
):
    """Open duplicates of fds 0 and 1 as asyncio pipes; None unless both are pipes or sockets."""
    if not all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in _modes(0, 1)):
        return None
    loop = asyncio.get_running_loop()
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    stdout = os.fdopen(os.dup(1), "wb", buffering=0)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), stdin
        )
    except (ValueError, OSError):  # a regular file or another kind asyncio cannot poll
        stdin.close()
        stdout.close()
        return None
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stdout
        )
    except (ValueError, OSError):
        read_transport.close()
        stdout.close()
        return None
    return reader, asyncio.StreamWriter(transport, protocol, None, loop), read_transport


def _modes(*fds: int) -> list[int]:
    modes = []
    for fd in fds:
        try:
            modes.append(os.fstat(fd).st_mode)
        except OSError:  # closed: nothing to serve on
            modes.append(0)
    return modes


@contextlib.asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """Yield line reader and writer over the process's stdio, or None when they are not pipes.

    None (a terminal, or stdin redirected from a regular file) means: use the SDK's own stdio.
    """
    pipes = await _connect()
    if pipes is None:
        yield None
        return
    reader, writer, read_transport = pipes
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        yield PipeLines(reader), PipeWriter(writer)
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()
        read_transport.close()
