"""The issuer's signing keys: a lazy JWKS fetch over vetted addresses, and the key cache.

The cache holds the whole key set for five minutes after a successful fetch. A miss (unknown
kid, wrong algorithm, expired set) may fetch at most once a minute per process, the attempt
time being recorded before the fetch, so a flood of tokens with made-up kids costs the issuer
one request a minute. Concurrent misses share one fetch. A failed fetch never revives an
expired set, and a successful one replaces the set, so a key removed by the issuer stops
working here at the next fetch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, Protocol

import structlog

from providers.off_loop import off_loop
from service.auth.resource.jwks import MAX_JWKS_BYTES, Alg, JwksError, PublicKey, parse_jwks
from service.wire.outbound import FetchFailed, OutboundGet

KEY_SET_TTL_S: Final = 300.0
FETCH_INTERVAL_S: Final = 60.0
FETCH_TIMEOUT_S: Final = 5.0
log = structlog.get_logger("angelos.auth")


class KeySource(Protocol):
    """Where the key set's JSON document comes from."""

    async def fetch(self) -> bytes:
        """Return the JWKS document or raise FetchFailed."""
        ...

    async def aclose(self) -> None:
        """Release any connection the source holds."""
        ...


class HttpsKeySource:
    """GET the JWKS URL: no redirects, no proxies, no credentials, 5 s, at most 256 KiB."""

    def __init__(self, url: str, ca_file: str | None, allow_private_hosts: bool) -> None:
        self.url = url
        self.client = OutboundGet(
            ca_file, allow_private_hosts, total_s=FETCH_TIMEOUT_S, max_bytes=MAX_JWKS_BYTES
        )

    async def fetch(self) -> bytes:
        """Fetch the document; every failure is FetchFailed with a short reason."""
        return (await self.client.get(self.url)).body

    async def aclose(self) -> None:
        """Close the HTTP session."""
        await self.client.aclose()


class LocalKeySource:
    """The server's own published key set (first-party mode): the same rules, no network."""

    def __init__(self, document: bytes) -> None:
        self.document = bytes(document)  # a copy: later changes by the caller have no effect

    async def fetch(self) -> bytes:
        """Return the document."""
        return self.document

    async def aclose(self) -> None:
        """Nothing to release."""
        return None


class KeyCache:
    """The key set with its expiry and the once-a-minute fetch throttle."""

    def __init__(self, source: KeySource, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.clock = clock
        self._keys: dict[str, PublicKey] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0  # attempts made, for capabilities-style diagnostics and tests

    def _hit(self, kid: str, alg: Alg) -> PublicKey | None:
        if self._fetched_at is None or self.clock() - self._fetched_at >= KEY_SET_TTL_S:
            return None
        key = self._keys.get(kid)
        return key if key is not None and key.alg == alg else None

    async def key_for(self, kid: str, alg: Alg) -> PublicKey | None:
        """Return the key for (kid, alg), fetching the set when allowed; None when there is none."""
        key = self._hit(kid, alg)
        if key is not None:
            return key
        async with self._lock:
            key = self._hit(kid, alg)  # a fetch that ran while this call waited may have it
            if key is not None:
                return key
            now = self.clock()
            if self._attempted_at is not None and now - self._attempted_at < FETCH_INTERVAL_S:
                return None
            self._attempted_at = now
            self.fetches += 1
            try:
                # A hostile 256 KiB document takes ~50 ms to refuse: too close to the loop budget.
                keys = await off_loop(parse_jwks, await self.source.fetch())
            except (FetchFailed, JwksError) as exc:
                log.warning("jwks_refresh_failed", reason=str(exc))
                return None
            self._keys, self._fetched_at = keys, self.clock()
            log.info("jwks_refreshed", keys=len(keys))
            return self._hit(kid, alg)

    async def aclose(self) -> None:
        """Close the key source."""
        await self.source.aclose()
