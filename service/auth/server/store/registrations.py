"""Self-registered clients (RFC 7591): kept briefly until the owner consents, then with a grant.

A registration is stored under SHA-256 of its client ID for 10 minutes and counted as pending
(at most 32 at once); the grant its consent creates keeps it as long as that grant (grants.py,
in the same script), and takes it off the pending count. One never consented simply expires.
"""

from __future__ import annotations

from service.auth.server.registration import SelfRegistered

from ._core import MAX_RECORD_BYTES, StoreCore, decode, encode
from .errors import StoreCorrupt
from .keys import sha256_hex


class RegistrationGone(Exception):
    """The self-registered client's registration expired before the owner consented."""


class RegistrationsFull(Exception):
    """Too many registrations wait for consent; a new one must wait until some expire."""


def registration_handle(client_id: str) -> str:
    """The handle of a registration: the hex SHA-256 of its client ID."""
    return sha256_hex(client_id)


def registration_key(core: StoreCore, client_id: str) -> str:
    """The key of a registration, under the owner's namespace."""
    return f"{core.keys.prefix}registration:{registration_handle(client_id)}"


def pending_key(core: StoreCore) -> str:
    """The sorted set of registrations waiting for consent (scored by their expiry, ms)."""
    return f"{core.keys.prefix}registrations:pending"


class RegistrationStore:
    """Adding and reading self-registered clients."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def add(self, client: SelfRegistered) -> None:
        """Store a new registration for the pending lifetime; RegistrationsFull at the cap."""
        limits = self.core.limits
        status, _ = await self.core.script_status(
            "register",
            [registration_key(self.core, client.client_id), pending_key(self.core)],
            [
                registration_handle(client.client_id),
                encode(client),
                limits.registration_pending_s * 1000,
                limits.max_pending_registrations,
            ],
        )
        if status == "full":
            raise RegistrationsFull("too many registrations wait for the owner's consent")
        if status != "ok":
            raise StoreCorrupt(f"the registration script answered {status!r}")

    async def get(self, client_id: str) -> SelfRegistered | None:
        """The registration of this client ID, or None (unknown or expired)."""
        key = registration_key(self.core, client_id)
        raw = await self.core.call(self.core.client.get(key))
        if raw is None:
            return None
        client = decode(raw, SelfRegistered, MAX_RECORD_BYTES)
        if client.client_id != client_id:
            raise StoreCorrupt("a stored registration names another client")
        return client

    async def ttl_ms(self, client_id: str) -> int:
        """How long the registration is still kept, in ms (negative: gone or no expiry)."""
        value = await self.core.call(self.core.client.pttl(registration_key(self.core, client_id)))
        return int(value)
