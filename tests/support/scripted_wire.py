"""The in-memory end of a scripted IMAP peer: replies go to the session's WireProtocol."""

from __future__ import annotations

import asyncio

from providers.imap.wire import WireProtocol


class ScriptedTransport(asyncio.Transport):
    """A transport with no network: subclasses answer `write`, `feed` delivers their replies."""

    def __init__(self) -> None:
        super().__init__()
        self.wire: WireProtocol | None = None
        self.closed = False

    def feed(self, data: bytes) -> None:
        assert self.wire is not None
        asyncio.get_running_loop().call_soon(self.wire.data_received, data)

    def abort(self) -> None:
        if not self.closed and self.wire is not None:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.wire.connection_lost, None)

    def close(self) -> None:
        self.abort()

    def is_closing(self) -> bool:
        return self.closed
