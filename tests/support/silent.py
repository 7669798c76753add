"""A loopback port that accepts connections and never answers: an issuer gone quiet."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """Yield the port of a listening socket that nobody serves."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
