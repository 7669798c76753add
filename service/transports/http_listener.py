"""The listening socket's per-connection protocol: aiohttp's, with a head deadline and quiet 400s.

aiohttp 3.x has no header-read timeout. Its keep-alive timer closes a connection that waits
too long for its next request head, but before 3.14 it only starts after a first response, so
a connection that never completes a head (silent, or one header line a second) stays open
indefinitely; the deadline for that first head is written here. After a response, the
keep-alive timer (IDLE_TIMEOUT_S) bounds both an idle connection and a slow next head.

aiohttp logs every request it cannot parse at error level with a stack, and answers with a
400 body that quotes the offending bytes (a body it cannot decode, e.g. bad gzip, is even a 500
logged twice): anyone could flood the log and trip alerts, and the echo reflects request bytes.
Here such a request gets a short fixed 400 and one info line,
at most one per MALFORMED_LOG_EVERY_S, counting those not logged. Both behaviours live in
RequestHandler methods aiohttp calls on itself, so they are overridden in a subclass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from service.transports.http import SECURITY_HEADERS

# Errors that describe the request's bytes (head or body), never a fault of ours.
MALFORMED = (HttpProcessingError, RequestPayloadError)
# A client has this long from connecting to send its first complete request head.
HEAD_TIMEOUT_S = 10.0
# After a response, the connection closes unless the next request head is complete within this.
IDLE_TIMEOUT_S = 15.0
# A 16 KiB bearer token must fit in one header line (aiohttp's default limit is 8,190 bytes).
MAX_HEADER_LINE_BYTES = 20 * 1024
MALFORMED_LOG_EVERY_S = 60.0
MALFORMED_BODY = "malformed HTTP request\n"

log = structlog.get_logger("angelos.http")


class MalformedLog:
    """Log refused malformed requests at info, at most one line per interval."""

    def __init__(
        self, every_s: float = MALFORMED_LOG_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every_s = every_s
        self.clock = clock
        self.last: float | None = None
        self.suppressed = 0

    def note(self, reason: str) -> bool:
        """Count one refused request; log it (with the count not logged since) unless too soon."""
        now = self.clock()
        if self.last is not None and now - self.last < self.every_s:
            self.suppressed += 1
            return False
        log.info("malformed HTTP request refused", reason=reason, not_logged_since=self.suppressed)
        self.last, self.suppressed = now, 0
        return True


class EdgeRequestHandler(RequestHandler):
    """aiohttp's HTTP/1.1 protocol with a deadline on the first request head and quiet 400s."""

    __slots__ = ("_head_deadline", "_malformed")

    def __init__(self, manager: web.Server, *, malformed: MalformedLog, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._malformed = malformed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start serving the connection, and its first head's deadline."""
        super().connection_made(transport)
        self._head_deadline = self._loop.call_later(HEAD_TIMEOUT_S, self._head_overdue)

    def connection_lost(self, exc: BaseException | None) -> None:
        """Drop the deadline with the connection."""
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        super().connection_lost(exc)

    def _head_overdue(self) -> None:
        # _request_count counts the heads parsed so far (malformed ones too).
        if self._request_count == 0:
            self.force_close()

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """aiohttp's error log, but for a malformed request, already counted by handle_error."""
        # After the 400, aiohttp drains the rest of an undecodable body and logs its error again.
        if not isinstance(kw.get("exc_info"), MALFORMED):
            super().log_exception(*args, **kw)

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse gets a short 400; any other error, aiohttp's answer."""
        if not isinstance(exc, MALFORMED):
            return super().handle_error(request, status, exc, message)
        self._malformed.note(type(exc).__name__)
        if request.writer.output_size > 0:  # as aiohttp: part of an answer is already out
            raise ConnectionError("a response was already started")
        response = web.Response(status=400, text=MALFORMED_BODY, headers=SECURITY_HEADERS)
        response.force_close()
        return response


def handler_factory(server: web.Server, loop: asyncio.AbstractEventLoop) -> Callable[[], Any]:
    """Make one EdgeRequestHandler per connection for the runner's server, with our limits."""
    malformed = MalformedLog()

    def protocol() -> EdgeRequestHandler:
        return EdgeRequestHandler(
            server,
            loop=loop,
            malformed=malformed,
            access_log=None,
            keepalive_timeout=IDLE_TIMEOUT_S,
            max_line_size=MAX_HEADER_LINE_BYTES,
            max_field_size=MAX_HEADER_LINE_BYTES,
        )

    return protocol
