"""A loopback TCP proxy counting connections and client bytes: a wire-side witness of access."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class CountingProxy:
    """Forward 127.0.0.1:<port> to a target, counting accepted connections and bytes sent to it."""

    def __init__(self, target_host: str, target_port: int, one_way_delay_s: float = 0.0) -> None:
        self.target = (target_host, target_port)
        self.delay = one_way_delay_s  # emulates a network path; benchmarks only
        self.connections = 0
        self.client_bytes = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def snapshot(self) -> tuple[int, int]:
        """Return (connections, client bytes) so far."""
        return self.connections, self.client_bytes

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._server.close()
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            # A delay line: each chunk leaves `delay` after it arrived, in order, while later
            # chunks keep arriving. (Sleeping before each write instead would add the delay
            # once per chunk, so a reply in three reads, or two commands sent back to back,
            # would cross a "network" three or two times slower than a real one.)
            line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def deliver() -> None:
                while True:
                    due, data = await line.get()
                    if not data:
                        return
                    wait = due - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    dst.write(data)
                    await dst.drain()

            loop = asyncio.get_running_loop()
            sender = asyncio.ensure_future(deliver())
            try:
                while data := await src.read(65536):
                    if count:
                        self.client_bytes += len(data)
                    line.put_nowait((loop.time() + self.delay, data))
                line.put_nowait((0.0, b""))
                await sender
            except (ConnectionError, asyncio.CancelledError):
                sender.cancel()
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
