"""Access tokens cached per grant and mailbox login, refreshed by one request at a time.

Every IMAP and SMTP connection of one mailbox asks the same `RefreshingTokens` for a token.
While the cached token is usable it is handed out as is; once it is not, the first caller starts
a refresh and every caller that arrives meanwhile waits for that same refresh (single flight),
so twenty connections opening at once cost the provider one request. The refresh runs as its
own task: a waiter that gives up (is cancelled) leaves it running for the others.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable

from msgspec import Struct

from providers.oauth2.profiles import RefreshGrant
from providers.oauth2.refresh import Refreshed, refresh_access_token
from providers.oauth2.source import AccessToken
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret


class _Cached(Struct, frozen=True):
    value: Secret
    generation: int
    usable_until: float  # on the cache's monotonic clock


class RefreshingTokens:
    """A TokenSource for one grant and login: a cached token, refreshed in a single flight."""

    def __init__(
        self,
        grant: RefreshGrant,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._grant = grant
        self._timeout_s = timeout_s
        self._clock = clock
        # Starts as the configured token; a grant that rotates replaces it with the newest one
        # the provider returned. Held in memory only, never written anywhere.
        self._refresh_token = grant.refresh_token
        self._cached: _Cached | None = None
        self._generation = 0
        self._flight: asyncio.Task[AccessToken] | None = None

    def __repr__(self) -> str:
        return f"RefreshingTokens({self._grant.provider}, generation={self._generation})"

    @property
    def recovery(self) -> str:
        """The grant's recovery text: how the owner gets a new refresh token."""
        return self._grant.recovery

    async def token(self) -> AccessToken:
        """A usable access token; raises ServiceUnavailable when none can be had."""
        cached = self._cached
        if cached is not None and self._clock() < cached.usable_until:
            return AccessToken(cached.value, cached.generation, fresh=False)
        loop = asyncio.get_running_loop()
        flight = self._flight
        if flight is None or flight.get_loop() is not loop:
            flight = loop.create_task(self._refresh())
            flight.add_done_callback(self._landed)
            self._flight = flight
        try:
            return await asyncio.shield(flight)
        except ServiceUnavailable as failure:
            kind, message = type(failure), failure.message
        # Each waiter raises its own copy: one exception object shared by many tasks would
        # collect all their tracebacks.
        raise kind(message) from None

    def invalidate(self, generation: int) -> None:
        """Forget the token of `generation` (a server refused it); later generations stay."""
        cached = self._cached
        if cached is not None and cached.generation == generation:
            self._cached = None

    async def _refresh(self) -> AccessToken:
        refreshed: Refreshed = await refresh_access_token(
            self._grant, self._refresh_token, timeout_s=self._timeout_s, clock=self._clock
        )
        if refreshed.refresh_token is not None:
            self._refresh_token = refreshed.refresh_token
        self._generation += 1
        self._cached = _Cached(refreshed.access_token, self._generation, refreshed.usable_until)
        return AccessToken(refreshed.access_token, self._generation, fresh=True)

    def _landed(self, flight: asyncio.Task[AccessToken]) -> None:
        if self._flight is flight:
            self._flight = None  # a failed flight is not remembered: the next call tries again
        if not flight.cancelled():
            flight.exception()  # retrieved even when every waiter gave up before it landed


_REGISTRY: dict[bytes, RefreshingTokens] = {}


def registry_key(grant: RefreshGrant, username: str) -> bytes:
    """SHA-256 of the token endpoint, client id, client secret, refresh token and username."""
    secret = grant.client_secret.reveal() if grant.client_secret is not None else None
    digest = hashlib.sha256()
    for part in (grant.token_url, grant.client_id, secret, grant.refresh_token.reveal(), username):
        if part is None:
            digest.update(b"\x00")  # no secret at all differs from an empty one
            continue
        encoded = part.encode("utf-8", "surrogatepass")
        # Length-prefixed, so no two different tuples feed the hash the same bytes.
        digest.update(b"\x01" + len(encoded).to_bytes(8, "big") + encoded)
    return digest.digest()


def tokens_for(grant: RefreshGrant, username: str, timeout_s: float) -> RefreshingTokens:
    """The process's one RefreshingTokens for this grant and login (the first one's timeout)."""
    key = registry_key(grant, username)
    found = _REGISTRY.get(key)
    if found is None:
        found = _REGISTRY[key] = RefreshingTokens(grant, timeout_s)
    return found
