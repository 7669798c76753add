"""stdin/stdout as raw lines for the stdio transport, with fds 0 and 1 kept off the wire.

Why not the SDK's own reader (mcp.server.stdio): it reads each line whole with no bound, so a
client line without a newline is buffered until EOF, and it makes every line read, write and
flush a hop to a worker thread (anyio.wrap_file), about half a millisecond per tool call on
this machine (bench/read_path.py).
When both descriptors are pipes or sockets, lines are read and written on the event loop
itself. A terminal or a regular file is read and written in worker threads as the SDK does: a
terminal's non-blocking mode would outlive this process in the user's shell.
Either way lines arrive as bytes, at most MAX_LINE of them; a longer line is skipped, reported
once as TOO_LONG, and serving goes on.
Like the SDK, serving diverts fd 0 to the null device and fd 1 to stderr, so stray output of
any library never reaches the wire; both are restored on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator, Iterator
from typing import Final, Protocol

import anyio
import anyio.to_thread

from service.transports.jsonrpc_edge import MAX_MESSAGE_BYTES

MAX_LINE: Final = MAX_MESSAGE_BYTES  # one JSON-RPC message, without its newline


class TooLong:
    """Stands for a line longer than MAX_LINE, already skipped."""


TOO_LONG_LINE: Final = TooLong()
Line = bytes | TooLong


class LineSource(Protocol):
    """Raw lines from the client, newline included; a TooLong marks a skipped line."""

    def __aiter__(self) -> LineSource: ...

    async def __anext__(self) -> Line: ...


class LineWriter(Protocol):
    """What mcp's stdio_server writes through: text, then flush."""

    async def write(self, text: str) -> None: ...

    async def flush(self) -> None: ...


class PipeLines:
    """The lines of the client's pipe, read on the event loop."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> Line:
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # EOF: a last line without newline, or none
            if not exc.partial:
                raise StopAsyncIteration from None
            return exc.partial
        except asyncio.LimitOverrunError as exc:  # longer than the reader's limit
            await self._skip_line(exc.consumed)
            return TOO_LONG_LINE

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


class ThreadLines:
    """The lines of a terminal or regular file, each read in a worker thread."""

    def __init__(self, fd: int) -> None:
        # Never closed: a worker may still block in read() on it when serving ends, and a
        # closed number could be reused under that read (the SDK keeps its copy open too).
        self._file = os.fdopen(fd, "rb", closefd=False)

    def __aiter__(self) -> ThreadLines:
        return self

    async def __anext__(self) -> Line:
        line = await anyio.to_thread.run_sync(self._file.readline, MAX_LINE + 1)
        if not line:
            raise StopAsyncIteration
        if len(line) <= MAX_LINE or line.endswith(b"\n"):
            return line
        while line and not line.endswith(b"\n"):
            line = await anyio.to_thread.run_sync(self._file.readline, MAX_LINE)
        return TOO_LONG_LINE


class ThreadWriter:
    """Writes lines to a terminal or regular file in a worker thread, one line at a time."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb")
        self._lock = anyio.Lock()  # the SDK's replies and ours must not interleave

    async def write(self, text: str) -> None:
        """Write text through the file's buffer."""
        async with self._lock:
            await anyio.to_thread.run_sync(self._file.write, text.encode("utf-8"))

    async def flush(self) -> None:
        """Push the buffer out."""
        async with self._lock:
            await anyio.to_thread.run_sync(self._file.flush)

    def close(self) -> None:
        """Flush what is left and close the duplicate."""
        with contextlib.suppress(OSError):
            self._file.close()


async def _connect_pipes() -> (
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
    except (ValueError, OSError):  # a kind asyncio cannot poll
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


@contextlib.contextmanager
def _diverted() -> Iterator[None]:
    """Point fd 0 at the null device and fd 1 at stderr; restore both on exit."""
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        yield
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


@contextlib.asynccontextmanager
async def stdio_lines() -> AsyncIterator[tuple[LineSource, LineWriter]]:
    """Yield the client's line source and a writer over the process's stdin and stdout."""
    pipes = await _connect_pipes()
    if pipes is None:
        reader_fd, writer = os.dup(0), ThreadWriter(os.dup(1))
        with _diverted():
            try:
                yield ThreadLines(reader_fd), writer
            finally:
                with contextlib.suppress(OSError):
                    await anyio.to_thread.run_sync(writer.close)
        return
    reader, stream_writer, read_transport = pipes
    with _diverted():
        try:
            yield PipeLines(reader), PipeWriter(stream_writer)
        finally:
            with contextlib.suppress(Exception):
                await stream_writer.drain()
            stream_writer.close()
            read_transport.close()
