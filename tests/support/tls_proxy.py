"""A TLS-terminating TCP proxy on loopback: the reverse proxy a deployment puts in front.

It passes bytes through unchanged (so the client's Host header reaches angelos as sent) and
counts connections, like the test CA's other servers it presents the localhost certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@contextlib.asynccontextmanager
async def tls_proxy(
    port: int, backend_port: int, tls_dir: Path, backend_host: str = "127.0.0.1"
) -> AsyncIterator[None]:
    """Listen with TLS on 127.0.0.1:`port` and forward each connection to the backend."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
    tasks: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(backend_host, backend_port)
        except OSError:
            writer.close()
            return
        both = asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        task = asyncio.ensure_future(both)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        with contextlib.suppress(asyncio.CancelledError):  # the proxy is closing
            await task

    server = await asyncio.start_server(serve, "127.0.0.1", port, ssl=context)
    try:
        yield
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
