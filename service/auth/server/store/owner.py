"""The owner record (passkeys) and bootstrap enrollment.

Updates are compare-and-set on the whole record: a change made meanwhile by another request is
re-read and re-applied, never overwritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

from msgspec.structs import replace

from schemas.secret import Secret
from service.wire.b64url import encode_b64url

from ._core import MAX_CREDENTIALS, MAX_OWNER_BYTES, StoreCore, as_bytes, decode, encode
from .errors import CredentialRefused, StoreCorrupt, StoreUnavailable
from .keys import sha256_hex
from .records import BootstrapMarker, Credential, OwnerRecord

_CAS_ATTEMPTS: Final = 5


def owner_user_handle(subject: str) -> str:
    """Return the WebAuthn user handle: base64url SHA-256("angelos:owner:" + subject)."""
    digest = hashlib.sha256(f"angelos:owner:{subject}".encode()).digest()
    return encode_b64url(digest)


class OwnerStore:
    """Loading and changing the owner record."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def load(self) -> OwnerRecord | None:
        """Return the enrolled owner, or None before bootstrap enrollment."""
        found = await self._owner_bytes()
        return None if found is None else found[0]

    async def bootstrap_disabled(self) -> bool:
        """Say whether bootstrap enrollment already happened (the persistent marker exists)."""
        return bool(
            await self.core.call(self.core.client.exists(self.core.keys.bootstrap_disabled))
        )

    async def complete_bootstrap(
        self, bootstrap_token: Secret, credential: Credential
    ) -> OwnerRecord | None:
        """Enroll the owner with a first passkey, atomically and only once.

        Writes the owner and the persistent marker only if neither exists; returns None when
        either does (a second or racing enrollment).
        """
        now = self.core.now()
        owner = OwnerRecord(
            v=1,
            subject=self.core.owner_subject,
            user_handle=owner_user_handle(self.core.owner_subject),
            credentials=(credential,),
            created_unix=now,
        )
        marker = BootstrapMarker(
            v=1, token_sha256=sha256_hex(bootstrap_token.reveal()), completed_unix=now
        )
        written = await self.core.script(
            "bootstrap",
            [self.core.keys.owner, self.core.keys.bootstrap_disabled],
            [encode(owner, MAX_OWNER_BYTES), encode(marker)],
        )
        return owner if written == 1 else None

    async def add_credential(self, credential: Credential) -> OwnerRecord:
        """Add a passkey; CredentialRefused when there is no owner, 8 already, or a duplicate ID."""

        def add(owner: OwnerRecord) -> OwnerRecord:
            if len(owner.credentials) >= MAX_CREDENTIALS:
                raise CredentialRefused("the owner already has the maximum number of passkeys")
            if any(c.credential_id == credential.credential_id for c in owner.credentials):
                raise CredentialRefused("this passkey is already enrolled")
            return replace(owner, credentials=(*owner.credentials, credential))

        updated = await self._update(add)
        if updated is None:
            raise CredentialRefused("no owner is enrolled")
        return updated

    async def update_sign_count(self, credential_id: str, sign_count: int) -> bool:
        """Record a passkey's new signature counter after a sign-in.

        Returns False (sign-in refused) for an unknown credential or a counter that went
        backwards; a counter that stays 0 is an authenticator without counters.
        """

        now = self.core.now()

        def bump(owner: OwnerRecord) -> OwnerRecord:
            found = [c for c in owner.credentials if c.credential_id == credential_id]
            if not found:
                raise _Refused
            old = found[0]
            if sign_count < old.sign_count or (sign_count == old.sign_count and sign_count):
                raise _Refused
            new = replace(old, sign_count=sign_count, last_used_unix=now)
            return replace(
                owner, credentials=tuple(new if c is old else c for c in owner.credentials)
            )

        try:
            return await self._update(bump) is not None
        except _Refused:
            return False

    async def _owner_bytes(self) -> tuple[OwnerRecord, bytes] | None:
        stored = await self.core.call(self.core.client.get(self.core.keys.owner))
        if stored is None:
            return None
        raw = as_bytes(stored)
        owner = decode(raw, OwnerRecord, MAX_OWNER_BYTES)
        if owner.subject != self.core.owner_subject or len(owner.credentials) > MAX_CREDENTIALS:
            raise StoreCorrupt("the stored owner is not this deployment's")
        return owner, raw

    async def _update(self, change: Callable[[OwnerRecord], OwnerRecord]) -> OwnerRecord | None:
        for _ in range(_CAS_ATTEMPTS):
            found = await self._owner_bytes()
            if found is None:
                return None
            updated = change(found[0])
            swapped = await self.core.script(
                "swap", [self.core.keys.owner], [found[1], encode(updated, MAX_OWNER_BYTES)]
            )
            if swapped == 1:
                return updated
        raise StoreUnavailable("the owner record kept changing; try again")


class _Refused(Exception):
    pass
