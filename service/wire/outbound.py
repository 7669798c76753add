"""One guarded HTTPS GET for documents the server fetches itself (signing keys, client metadata).

Only addresses vetted by the mail clients' resolver are dialled (public ones, unless the
operator's switch allows private ones), the TLS certificate is verified against the system
roots plus an optional CA file, proxies and redirects are never followed, no credential or
cookie is sent, headers are capped at 16 KiB and the body at the caller's limit, and the whole
request has a deadline.
"""

from __future__ import annotations

import asyncio
from typing import Final

import aiohttp
import msgspec

from providers.netsafety import tls_context
from providers.vetted_http import VettedResolver
from schemas.errors import ServiceUnavailable

MAX_HEADER_BYTES: Final = 16 * 1024


class FetchFailed(Exception):
    """The document could not be fetched; the message is a short, value-free reason."""


class Fetched(msgspec.Struct, frozen=True):
    """A 200 answer: its media type, its Cache-Control header and its body."""

    body: bytes
    media_type: str
    cache_control: str


class OutboundGet:
    """A small client for guarded GETs of JSON documents."""

    def __init__(
        self,
        ca_file: str | None,
        allow_private_hosts: bool,
        *,
        total_s: float,
        max_bytes: int,
        step_s: float | None = None,  # connect, TLS and response-header time, each
    ) -> None:
        self.ca_file = ca_file
        self.allow_private_hosts = allow_private_hosts
        self.total_s = total_s
        self.step_s = step_s
        self.max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                resolver=VettedResolver(self.allow_private_hosts),
                ssl=tls_context(self.ca_file),
                use_dns_cache=False,
                limit=4,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,  # HTTPS_PROXY and friends are never used
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(
                    total=self.total_s, sock_connect=self.step_s, sock_read=self.step_s
                ),
                max_line_size=MAX_HEADER_BYTES,
                max_field_size=MAX_HEADER_BYTES,
            )
        return self._session

    async def get(self, url: str) -> Fetched:
        """GET `url`; anything but a 200 within the limits is FetchFailed."""
        try:
            async with asyncio.timeout(self.total_s):
                return await self._get(url)
        except FetchFailed:
            raise
        except ServiceUnavailable:
            raise FetchFailed("the host resolves to a refused address") from None
        except TimeoutError:
            raise FetchFailed("the fetch timed out") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise FetchFailed(f"the fetch failed ({type(exc).__name__})") from None

    async def _get(self, url: str) -> Fetched:
        headers = {"Accept": "application/json"}
        async with self._client().get(url, headers=headers, allow_redirects=False) as resp:
            if resp.status != 200:
                raise FetchFailed(f"the URL answered HTTP {resp.status}")
            declared = resp.content_length
            if declared is not None and declared > self.max_bytes:
                raise FetchFailed("the document is too large")
            body = bytearray()
            async for chunk in resp.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > self.max_bytes:
                    raise FetchFailed("the document is too large")
            return Fetched(
                bytes(body),
                resp.content_type,
                resp.headers.get("Cache-Control", ""),
            )

    async def aclose(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
