"""Where a grant whose refresh tokens rotate keeps the newest one between processes and restarts.

The token cache asks the store once, before its first refresh, for the token stored so far, and
hands it every rotated token the provider returns; the store replaces its record only when it
still holds exactly the record this process last saw, so two processes that refresh at once end
with one stored token, the winner's, which the loser adopts. What the store is (Redis, encrypted)
is the service's business: providers see only this protocol.
"""

from __future__ import annotations

from typing import Protocol

from msgspec import Struct

from schemas.secret import Secret


class StoredToken(Struct, frozen=True):
    """A refresh token as a store holds it: its value, and the exact record it was read from."""

    refresh_token: Secret
    record: str  # the store's exact stored record (opaque here, e.g. a ciphertext): the CAS key


class RotationStore(Protocol):
    """The shared home of one grant's newest refresh token."""

    async def load(self) -> StoredToken | None:
        """The stored token, or None when nothing is stored yet (use the configured seed token).

        Raises ServiceUnavailable when the store fails closed (unreachable, malformed, wrong key).
        """
        ...

    async def swap(self, previous: StoredToken | None, new: Secret) -> StoredToken:
        """Store `new` if the store still holds exactly `previous` (None: nothing stored).

        Returns the record now stored: the new one, or another process's when it won the race.
        Raises ServiceUnavailable on a store error (whether the write landed is then unknown).
        """
        ...
