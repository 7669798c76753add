"""Access tokens cached per grant and mailbox login, refreshed by one request at a time.

Every IMAP and SMTP connection of one mailbox asks the same `RefreshingTokens` for a token.
While the cached token is usable it is handed out as is; once it is not, the first caller starts
a refresh and every caller that arrives meanwhile waits for that same refresh (single flight),
so twenty connections opening at once cost the provider one request. The refresh runs as its
own task: a waiter that gives up (is cancelled) leaves it running for the others.

A grant may keep its rotated refresh tokens in a RotationStore shared with other processes: the
stored token is read once, before the first refresh, and every rotated token is swapped in after
the refresh that returned it. A store that fails makes the flight fail before any request to the
provider, or, after one, without another; a rotated token the store has not confirmed is offered
to it again before the next request.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Sequence

from msgspec import Struct

from providers.oauth2.profiles import RefreshGrant
from providers.oauth2.refresh import Refreshed, refresh_access_token
from providers.oauth2.rotation import RotationStore, StoredToken
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
        rotation: RotationStore | None = None,
    ) -> None:
        self._grant = grant
        self._timeout_s = timeout_s
        self._clock = clock
        # Starts as the configured token (or the stored one); a grant that rotates replaces it
        # with the newest one the provider returned, or the store holds after a lost race.
        self._refresh_token = grant.refresh_token
        self._rotation = rotation
        self._attached = rotation is None  # the store is read once, before the first refresh
        self._stored: StoredToken | None = None  # the record this process last saw stored
        self._unsaved: Secret | None = None  # a rotated token the store has not confirmed
        self._cached: _Cached | None = None
        self._generation = 0
        self._flight: asyncio.Task[AccessToken] | None = None

    def __repr__(self) -> str:
        return f"RefreshingTokens({self._grant.provider}, generation={self._generation})"

    @property
    def rotation(self) -> RotationStore | None:
        """The store this source keeps its rotated refresh tokens in, if any."""
        return self._rotation

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
        # Store steps come first: a store that fails here costs the provider no request.
        await self._attach()
        await self._save()
        refreshed: Refreshed = await refresh_access_token(
            self._grant, self._refresh_token, timeout_s=self._timeout_s, clock=self._clock
        )
        if refreshed.refresh_token is not None:
            if self._rotation is None:
                self._refresh_token = refreshed.refresh_token  # held in memory only
            else:
                self._unsaved = refreshed.refresh_token
                # A store error fails the flight here: never another request to the provider.
                await self._save()
        self._generation += 1
        self._cached = _Cached(refreshed.access_token, self._generation, refreshed.usable_until)
        return AccessToken(refreshed.access_token, self._generation, fresh=True)

    async def _attach(self) -> None:
        if self._attached or self._rotation is None:
            return
        stored = await self._rotation.load()
        if stored is not None:
            self._refresh_token = stored.refresh_token
        self._stored = stored
        self._attached = True

    async def _save(self) -> None:
        new = self._unsaved
        if new is None or self._rotation is None:
            return
        # After a lost race the stored record is the winner's; after an earlier write whose
        # answer was lost it is our own. Either way its token is the one to use next.
        stored = await self._rotation.swap(self._stored, new)
        self._stored = stored
        self._refresh_token = stored.refresh_token
        self._unsaved = None

    def _landed(self, flight: asyncio.Task[AccessToken]) -> None:
        if self._flight is flight:
            self._flight = None  # a failed flight is not remembered: the next call tries again
        if not flight.cancelled():
            flight.exception()  # retrieved even when every waiter gave up before it landed


_REGISTRY: dict[bytes, RefreshingTokens] = {}
_ROTATING: dict[bytes, RefreshingTokens] = {}


def registry_key(grant: RefreshGrant, username: str) -> bytes:
    """SHA-256 of the token endpoint, client id, client secret, refresh token and username."""
    return _digest((*_grant_parts(grant), username))


def rotating_registry_key(grant: RefreshGrant, binding: Sequence[str | Secret]) -> bytes:
    """SHA-256 of the token endpoint (and so its tenant), client id, client secret, initial
    refresh token and `binding` (what else names the stored token, e.g. account, sender, key)."""
    revealed = (part.reveal() if isinstance(part, Secret) else part for part in binding)
    return _digest(("rotating", *_grant_parts(grant), *revealed))


def _grant_parts(grant: RefreshGrant) -> tuple[str | None, ...]:
    secret = grant.client_secret.reveal() if grant.client_secret is not None else None
    return (grant.token_url, grant.client_id, secret, grant.refresh_token.reveal())


def _digest(parts: Iterable[str | None]) -> bytes:
    digest = hashlib.sha256()
    for part in parts:
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


def rotating_tokens_for(
    grant: RefreshGrant,
    binding: Sequence[str | Secret],
    rotation: RotationStore,
    timeout_s: float,
) -> RefreshingTokens:
    """The process's one RefreshingTokens for this grant, binding and store object.

    Asked again with another store object for the same key (a second application in one process,
    as tests build them), it starts a new source: the old one keeps serving its own store.
    """
    key = rotating_registry_key(grant, binding)
    found = _ROTATING.get(key)
    if found is None or found.rotation is not rotation:
        found = _ROTATING[key] = RefreshingTokens(grant, timeout_s, rotation=rotation)
    return found
