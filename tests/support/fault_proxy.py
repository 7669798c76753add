"""A loopback TCP proxy whose forwarding a test can reset, delay, stall or blackhole at run time.

Modes (each applies to data the proxy reads after the call, on existing and new connections):
  heal()            forward everything normally (the default); ends a stall.
  reset_after(n)    each connection forwards n more bytes (both directions together), then is
                    reset (RST: SO_LINGER 0 and close, both sides); 0 resets at once and on accept.
  delay(s)          every chunk, each direction, is held s seconds before it is forwarded, in order.
  stall()           bytes are held, not dropped, and connections stay open; heal() delivers them.
  blackhole()       bytes are dropped for good, connections stay open, new ones forward nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Literal

_LINGER_ZERO = struct.pack("ii", 1, 0)
_READ_SIZE = 65536

Kind = Literal["heal", "reset", "delay", "stall", "blackhole"]


@dataclass(frozen=True)
class _Mode:
    kind: Kind
    seconds: float = 0.0
    n_bytes: int = 0


@dataclass
class _Chunk:
    """Bytes (or an end of stream, or a reset) waiting to be forwarded in one direction."""

    data: bytes = b""
    eof: bool = False
    reset: bool = False
    release_at: float = 0.0  # loop time before which it is not forwarded (delay)
    gate: asyncio.Event | None = None  # set when the stall it arrived in ends


@dataclass(eq=False)
class _Conn:
    """One proxied connection: its two sockets, reset budget, pumping tasks and half-closes."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    budget: int | None = None  # bytes left before a reset, under reset_after
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    eofs: int = 0
    closed: bool = False

    def close(self, rst: bool = False) -> None:
        """Abort both sides (with RST when asked) and cancel the other pumping tasks."""
        if self.closed:
            return
        self.closed = True
        for writer in (self.client, self.upstream):
            if writer is None:
                continue
            if rst:
                sock = writer.get_extra_info("socket")
                with contextlib.suppress(OSError, AttributeError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            writer.transport.abort()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


class FaultProxy:
    """Forward 127.0.0.1:<port> to a target from a private loop thread, with steerable faults."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0  # accepted so far
        self.resets = 0  # connections it reset (reset_after, or the target refusing)
        self._mode = _Mode("heal")
        self._gate: asyncio.Event | None = None  # the current stall's release
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Listen on a free loopback port (self.port) and start forwarding."""
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError("the fault proxy did not start")

    def close(self) -> None:
        """Stop listening and abort every connection, whatever the mode (within a second)."""
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            future.result(0.5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(0.5)

    def heal(self) -> None:
        """Forward everything normally (the default); bytes held by a stall are delivered."""
        self._apply(_Mode("heal"))

    def reset_after(self, n_bytes: int) -> None:
        """Reset every connection, existing or new, once it has forwarded n_bytes more."""
        if n_bytes < 0:
            raise ValueError("n_bytes must be >= 0")
        self._apply(_Mode("reset", n_bytes=n_bytes))

    def delay(self, seconds: float) -> None:
        """Hold every chunk, in each direction, that long before forwarding it (order kept)."""
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        self._apply(_Mode("delay", seconds=seconds))

    def stall(self) -> None:
        """Hold arriving bytes (connections stay open) until heal() delivers them in order."""
        self._apply(_Mode("stall"))

    def blackhole(self) -> None:
        """Drop arriving bytes for good; connections stay open, new ones forward nothing."""
        self._apply(_Mode("blackhole"))

    # ----------------------------------------------------------------------- the proxy loop

    def _apply(self, mode: _Mode) -> None:
        if not self._thread.is_alive() or threading.current_thread() is self._thread:
            self._set_mode(mode)
            return
        done = threading.Event()

        def apply() -> None:
            self._set_mode(mode)
            # Queued after the closes that _set_mode scheduled, so a reset has happened on return.
            self._loop.call_soon(done.set)

        self._loop.call_soon_threadsafe(apply)
        if not done.wait(10):
            raise RuntimeError("the fault proxy loop did not answer")

    def _set_mode(self, mode: _Mode) -> None:
        if mode.kind != "stall" and self._gate is not None:
            self._gate.set()
            self._gate = None
        if mode.kind == "stall" and self._gate is None:
            self._gate = asyncio.Event()
        self._mode = mode
        for conn in list(self._conns):
            self._arm(conn)

    def _arm(self, conn: _Conn) -> None:
        """Give a connection the current reset budget (resetting it at once for 0)."""
        conn.budget = self._mode.n_bytes if self._mode.kind == "reset" else None
        if conn.budget == 0:
            self._reset(conn)

    def _reset(self, conn: _Conn) -> None:
        if not conn.closed:
            self.resets += 1
        conn.close(rst=True)
        self._conns.discard(conn)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
        finally:
            self._ready.set()
        self._loop.run_forever()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.close()
        self._conns.clear()
        await asyncio.sleep(0)  # let the aborts close their sockets

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = _Conn(writer)
        self._conns.add(conn)
        self._arm(conn)
        if conn.closed:
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._reset(conn)  # the target refuses: the client sees its connection reset
            return
        if conn.closed:  # reset (or proxy closed) while connecting
            up_writer.transport.abort()
            return
        conn.upstream = up_writer
        to_upstream: asyncio.Queue[_Chunk] = asyncio.Queue()
        to_client: asyncio.Queue[_Chunk] = asyncio.Queue()
        conn.tasks = [
            asyncio.create_task(self._read(conn, reader, to_upstream)),
            asyncio.create_task(self._deliver(conn, to_upstream, up_writer)),
            asyncio.create_task(self._read(conn, up_reader, to_client)),
            asyncio.create_task(self._deliver(conn, to_client, writer)),
        ]
        await asyncio.gather(*conn.tasks, return_exceptions=True)
        conn.close()
        self._conns.discard(conn)

    async def _read(
        self, conn: _Conn, src: asyncio.StreamReader, out: asyncio.Queue[_Chunk]
    ) -> None:
        """Read one direction and queue what the mode lets through, stamped for delivery."""
        try:
            while data := await src.read(_READ_SIZE):
                if conn.budget is not None:
                    take = min(len(data), conn.budget)
                    conn.budget -= take
                    if take:
                        out.put_nowait(_Chunk(data[:take]))
                    if conn.budget == 0:
                        out.put_nowait(_Chunk(reset=True))
                        return
                elif self._mode.kind != "blackhole":
                    out.put_nowait(self._stamp(_Chunk(data)))
            out.put_nowait(self._stamp(_Chunk(eof=True)))
        except OSError:
            conn.close()

    def _stamp(self, chunk: _Chunk) -> _Chunk:
        if self._mode.kind == "delay":
            chunk.release_at = self._loop.time() + self._mode.seconds
        elif self._mode.kind == "stall":
            chunk.gate = self._gate
        return chunk

    async def _deliver(
        self, conn: _Conn, queue: asyncio.Queue[_Chunk], dst: asyncio.StreamWriter
    ) -> None:
        """Forward one direction's queued chunks in order, each once its hold is over."""
        try:
            while True:
                chunk = await queue.get()
                if chunk.gate is not None:
                    await chunk.gate.wait()
                if (wait := chunk.release_at - self._loop.time()) > 0:
                    await asyncio.sleep(wait)
                if chunk.reset:
                    self._reset(conn)
                    return
                if chunk.eof:
                    with contextlib.suppress(OSError):
                        dst.write_eof()
                    conn.eofs += 1
                    if conn.eofs == 2:
                        conn.close()
                    return
                dst.write(chunk.data)
                await dst.drain()
        except OSError:
            conn.close()
