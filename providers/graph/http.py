"""Requests to Microsoft Graph: the pinned host, the headers, the limits and the one retry rule.

Every request goes to https://graph.microsoft.com/v1.0/me… through the vetted resolver with
verified TLS, no proxy, no redirect and no compression, at most four at a time (Graph's
per-mailbox concurrency limit). Whether a request may be made again is decided here and only
here, by its `Kind`:

- a read may wait out one 429 or 503 (`Retry-After`, at most 5 s) and try once more;
- a write that cannot send (a flag, a move, a draft) may wait out one 429, which Graph answers
  before doing anything; any other failure of it is for the caller to classify;
- the send request is made exactly once, on a connection of its own, so that a failure to
  connect proves nothing left.

A 401 drops the access token that failed; a read or a non-sending write then tries once with a
new token (Graph checks the token before it acts).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ssl
import time
import uuid
from enum import Enum
from typing import Final

import aiohttp
from msgspec import Struct

from providers.netsafety import tls_context
from providers.oauth2.source import TokenSource
from providers.off_loop import off_loop
from providers.vetted_http import VettedResolver
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret

GRAPH_HOST: Final = "graph.microsoft.com"
GRAPH_ROOT: Final = f"https://{GRAPH_HOST}/v1.0"
ME: Final = f"{GRAPH_ROOT}/me"
MAX_CONCURRENT: Final = 4  # Graph's MailboxConcurrency limit
MAX_JSON_BYTES: Final = 2 * 1024 * 1024
MAX_RETRY_AFTER_S: Final = 5.0
MAX_HEADER_BYTES: Final = 16 * 1024
_READ_CHUNK: Final = 64 * 1024


class Kind(Enum):
    """What a request can do, which decides whether it may ever be made twice."""

    READ = "read"
    WRITE = "write"  # changes the mailbox, cannot send
    SEND = "send"  # can send a message: exactly once


class Answer(Struct, frozen=True):
    """One HTTP answer: status, the body read (bounded) and whether more was cut off."""

    status: int
    body: bytes
    cut: bool = False  # the body ran past the request's limit; `body` holds the limit's bytes
    declared_length: int | None = None  # Content-Length, when the answer declared one
    retry_after_s: float = 1.0  # from Retry-After (429 and 503 only)


class ExchangeLost(Exception):
    """No answer: `connected` tells whether the request may have reached Graph."""

    def __init__(self, connected: bool, cause: str) -> None:
        super().__init__(cause)
        self.connected = connected
        self.cause = cause  # "timeout" or "transport_error"


class GraphHttp:
    """One mailbox's requests to Graph, its access tokens and its connection pool."""

    def __init__(self, tokens: TokenSource, timeout_s: float) -> None:
        self.tokens = tokens
        self.timeout_s = timeout_s
        self._gate = asyncio.Semaphore(MAX_CONCURRENT)
        self._session: aiohttp.ClientSession | None = None
        self.last_request_id = ""  # client-request-id of the latest request (for support cases)

    def __repr__(self) -> str:
        return f"GraphHttp(timeout_s={self.timeout_s})"

    async def request(
        self,
        kind: Kind,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json: bytes | None = None,
        mime: bytes | None = None,
        limit: int = MAX_JSON_BYTES,
        timeout_s: float | None = None,
    ) -> Answer:
        """Make one request under the rules of `kind` (within `timeout_s`, by default the
        mailbox timeout); raise ExchangeLost when no answer came back."""
        if not url.startswith(ME + "/") and url != ME:
            raise ValueError("Graph requests go under https://graph.microsoft.com/v1.0/me only")
        retried_token = waited = False
        while True:
            token = await self.tokens.token()
            answer = await self._once(
                kind, method, url, params, json, mime, limit, token.value, timeout_s
            )
            if answer.status == 401:
                self.tokens.invalidate(token.generation)
                if kind is not Kind.SEND and not retried_token and not token.fresh:
                    retried_token = True
                    continue
                return answer
            pause = _retry_after(kind, answer) if not waited else None
            if pause is None:
                return answer
            waited = True
            await asyncio.sleep(pause)

    async def _once(
        self,
        kind: Kind,
        method: str,
        url: str,
        params: dict[str, str] | None,
        json: bytes | None,
        mime: bytes | None,
        limit: int,
        token: Secret,
        timeout_s: float | None,
    ) -> Answer:
        request_id = str(uuid.uuid4())
        self.last_request_id = request_id
        headers = {
            "Authorization": f"Bearer {token.reveal()}",
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "Prefer": 'IdType="ImmutableId"',
            "client-request-id": request_id,
        }
        body: bytes | None = None
        if json is not None:
            headers["Content-Type"] = "application/json"
            body = json
        elif mime is not None:
            headers["Content-Type"] = "text/plain"
            body = mime
        async with self._gate:
            session = await self._session_for(kind)
            try:
                async with asyncio.timeout(timeout_s or self.timeout_s):
                    async with session.request(
                        method, url, params=params, data=body, headers=headers,
                        allow_redirects=False,
                    ) as response:  # fmt: skip
                        return await _read(response, limit)
            except TimeoutError:  # the request may have left: a timeout proves nothing
                lost = ExchangeLost(connected=True, cause="timeout")
            except aiohttp.ClientConnectorError:
                # Failed while connecting (DNS, TCP or the TLS handshake): nothing was sent.
                lost = ExchangeLost(connected=False, cause="transport_error")
            except ServiceUnavailable:  # the vetted resolver refused the name
                lost = ExchangeLost(connected=False, cause="transport_error")
            except (aiohttp.ClientError, OSError):
                lost = ExchangeLost(connected=True, cause="transport_error")
            finally:
                if kind is Kind.SEND:
                    await session.close()
            raise lost

    async def _session_for(self, kind: Kind) -> aiohttp.ClientSession:
        pooled = self._session
        if kind is not Kind.SEND and pooled is not None and not pooled.closed:
            return pooled  # its TLS context is already loaded
        try:  # the first call reads the system's roots from disk: not on the loop
            context = await off_loop(tls_context, None)
        except (OSError, ssl.SSLError):
            raise ServiceUnavailable("the system's CA certificates cannot be loaded") from None
        if kind is Kind.SEND:
            return _new_session(context, self.timeout_s, keep_alive=False)
        self._session = _new_session(context, self.timeout_s, keep_alive=True)
        return self._session

    async def aclose(self) -> None:
        """Close the pooled connections."""
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()
            self._session = None


def _new_session(
    context: ssl.SSLContext, timeout_s: float, *, keep_alive: bool
) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        resolver=VettedResolver(allow_private_hosts=False),  # the test seam alone reaches loopback
        ssl=context,
        use_dns_cache=False,
        force_close=not keep_alive,
        limit=MAX_CONCURRENT,
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,  # HTTPS_PROXY and friends are never used
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=timeout_s),
        auto_decompress=False,
        max_line_size=MAX_HEADER_BYTES,
        max_field_size=MAX_HEADER_BYTES,
    )


async def _read(response: aiohttp.ClientResponse, limit: int) -> Answer:
    status, declared = response.status, response.content_length
    pause = 1.0
    if status in (429, 503):
        pause = retry_after_of(response.headers.get("Retry-After"))
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding != "identity":
        return Answer(status, b"", cut=True, declared_length=declared, retry_after_s=pause)
    body = bytearray()
    async for chunk in response.content.iter_chunked(_READ_CHUNK):
        body += chunk
        if len(body) > limit:
            # Stop reading: the rest is never taken in, and the connection is not reused.
            response.close()
            return Answer(status, bytes(body[:limit]), True, declared, pause)
    return Answer(status, bytes(body), False, declared, pause)


def _retry_after(kind: Kind, answer: Answer) -> float | None:
    """How long to wait before the one permitted repeat, or None when it must not be made."""
    if kind is Kind.SEND:
        return None
    allowed = (429, 503) if kind is Kind.READ else (429,)
    if answer.status not in allowed:
        return None
    return min(MAX_RETRY_AFTER_S, answer.retry_after_s)


def retry_after_of(value: str | None, now: float | None = None) -> float:
    """Seconds from a Retry-After value (delta-seconds or an HTTP date); 1 s when unreadable."""
    if value is None:
        return 1.0
    value = value.strip()
    if value.isdigit() and len(value) <= 6:
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 1.0
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
