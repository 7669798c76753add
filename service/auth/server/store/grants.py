"""Grants, authorization codes and the online grant check.

Grant expiry is decided inside the scripts with the Redis clock (expired grants are pruned on
read, list and create); code expiry by the code's Redis TTL and, on read, the store clock.
A redeemed code is kept as a marker naming its grant until it would have expired; presenting it
again deletes that grant (consume.lua). Each consent makes its own grant and one code, so the
grant is exactly what the code issued: its refresh family (rotation needs the grant) and its
access tokens (the online check needs it) end with it.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from schemas.scopes import Scope
from schemas.secret import Secret

from ._core import (
    CODE_LIFETIME_S,
    MAX_GRANT_BYTES,
    Presented,
    StoreCore,
    as_bytes,
    decode,
    encode,
    is_token,
    reveal,
    text,
)
from .budgets import Budget, BudgetStore
from .errors import CodeReplayed, GrantLimitReached, StoreCorrupt, StoreError
from .keys import is_handle, new_token, seal, sha256_hex, unseal
from .records import AuthCode, Grant, Scopes
from .registrations import RegistrationGone, pending_key, registration_handle, registration_key

_CODE_GID = "code-grant"


def grant_handle(grant_id: Presented) -> str:
    """Return the handle of a grant: the hex SHA-256 of its ID (its field in the grants hash)."""
    return sha256_hex(reveal(grant_id))


class GrantEntry(msgspec.Struct, frozen=True):
    """A listed grant: its handle (what the grants page posts back to revoke it) and record."""

    handle: str
    grant: Grant


class _Redeemed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The marker a redeemed code leaves (written by consume.lua): which grant it made."""

    v: int
    redeemed: bool
    grant: str


class CodeRead(msgspec.Struct, frozen=True):
    """A code as read before its exchange: the record, its stored bytes and the grant ID."""

    record: AuthCode
    raw: bytes
    grant_id: Secret


class GrantStore:
    """Grants, codes and the per-grant token budget."""

    def __init__(self, core: StoreCore, budgets: BudgetStore) -> None:
        self.core = core
        self.budgets = budgets

    # ------------------------------------------------------------------------------ grants

    async def create(
        self,
        client_id: str,
        client_name: str,
        scopes: Iterable[Scope],
        *,
        self_registered: bool = False,
    ) -> tuple[Secret, Grant]:
        """Record a consented grant (30 days); raise GrantLimitReached at 128 active grants.

        For a self-registered client the same script keeps its registration as long as this
        grant, or raises RegistrationGone when it expired before the consent.
        """
        now = self.core.now()
        grant = Grant(
            v=1,
            subject=self.core.owner_subject,
            client_id=client_id,
            client_name=client_name,
            resource=self.core.resource,
            scopes=tuple(scopes),
            created_unix=now,
            expires_unix=now + self.core.limits.grant_lifetime_s,
        )
        if not grant.scopes:
            raise ValueError("a grant needs scopes")
        grant_id = new_token()
        keys = [self.core.keys.grants]
        args: list[str | int | bytes] = [
            grant_handle(grant_id),
            encode(grant, MAX_GRANT_BYTES),
            self.core.limits.max_grants,
            self.core.limits.grant_lifetime_s * 1000,
        ]
        if self_registered:
            keys += [registration_key(self.core, client_id), pending_key(self.core)]
            args.append(registration_handle(client_id))
        status, _ = await self.core.script_status("grant_create", keys, args)
        if status == "full":
            raise GrantLimitReached("the owner has the maximum number of active grants")
        if status == "unregistered":
            raise RegistrationGone("the registration expired before the owner consented")
        if status != "ok":
            raise StoreCorrupt(f"the grant script answered {status!r}")
        return Secret(grant_id), grant

    async def get(self, grant_id: Presented) -> Grant | None:
        """Return an unexpired grant by its ID, or None (unknown, revoked or expired)."""
        value = reveal(grant_id)
        if not is_token(value):
            return None
        return await self._read(grant_handle(value))

    async def _read(self, handle: str) -> Grant | None:
        status, rest = await self.core.script_status(
            "grant_read", [self.core.keys.grants], [handle]
        )
        if status == "missing":
            return None
        if status != "ok" or len(rest) != 1:
            raise StoreCorrupt("the grant read answered unexpectedly")
        grant = decode(rest[0], Grant, MAX_GRANT_BYTES)
        if grant.subject != self.core.owner_subject or grant.resource != self.core.resource:
            raise StoreCorrupt("a stored grant names another owner or resource")
        return grant

    async def list_active(self) -> list[GrantEntry]:
        """Return the owner's active grants, newest first (expired ones are pruned)."""
        status, rest = await self.core.script_status("grant_list", [self.core.keys.grants], [])
        if status != "ok" or len(rest) % 2:
            raise StoreCorrupt("the grant list answered unexpectedly")
        entries = []
        for field, raw in zip(rest[::2], rest[1::2], strict=True):
            handle = text(field)
            if not is_handle(handle):
                raise StoreCorrupt("a grants field is not a handle")
            entries.append(GrantEntry(handle, decode(raw, Grant, MAX_GRANT_BYTES)))
        entries.sort(key=lambda e: (e.grant.created_unix, e.handle), reverse=True)
        return entries

    async def revoke(self, handle: str) -> bool:
        """Delete a grant by its handle; return whether it existed.

        Its refresh family dies with it (rotation requires the grant) and so do its access
        tokens (the online grant check requires it).
        """
        if not is_handle(handle):
            return False
        return bool(await self.core.call(self.core.client.hdel(self.core.keys.grants, handle)))

    async def grant_active(
        self, gid: Presented, client_id: str, subject: str, scopes: Iterable[str]
    ) -> bool:
        """The online grant check: True only for a live grant of this client, subject and scopes.

        Never raises for store trouble: Redis failures and malformed state answer False.
        """
        wanted = tuple(scopes)
        value = reveal(gid)
        if not wanted or not is_token(value) or subject != self.core.owner_subject:
            return False
        try:
            grant = await self._read(grant_handle(value))
        except StoreError:
            return False
        return (
            grant is not None
            and grant.serves(client_id, subject, self.core.resource, self.core.now())
            and set(wanted) <= set(grant.scopes)
        )

    async def spend_budget(self, grant_id: Presented) -> Budget:
        """Count one token request against the grant's budget (120 per minute)."""
        return await self.budgets.spend_bucket(
            f"grant-tokens:{grant_handle(grant_id)}",
            self.core.limits.grant_budget,
            self.core.limits.grant_budget_window_s,
        )

    # ------------------------------------------------------------------------------- codes

    async def put_code(
        self,
        grant_id: Presented,
        grant: Grant,
        *,
        redirect_uri: str,
        code_challenge: str,
        scopes: Scopes | None = None,
    ) -> Secret:
        """Store an authorization code for a grant (5 min, SET NX); return the code."""
        chosen = grant.scopes if scopes is None else scopes
        if not chosen or not set(chosen) <= set(grant.scopes):
            raise ValueError("a code's scopes must be a non-empty subset of its grant's")
        code = new_token()
        now = self.core.now()
        record = AuthCode(
            v=1,
            subject=grant.subject,
            client_id=grant.client_id,
            redirect_uri=redirect_uri,
            resource=grant.resource,
            scopes=chosen,
            code_challenge=code_challenge,
            grant=grant_handle(grant_id),
            gid_sealed=seal(reveal(grant_id), purpose=_CODE_GID, key=code),
            created_unix=now,
            expires_unix=now + CODE_LIFETIME_S,
        )
        created = await self.core.call(
            self.core.client.set(
                self.core.bucket_key("code", code),
                encode(record),
                px=CODE_LIFETIME_S * 1000,
                nx=True,
            )
        )
        if not created:
            raise StoreCorrupt("a fresh code key already existed")
        return Secret(code)

    async def read_code(self, code: Presented) -> CodeRead | None:
        """Read a code without consuming it; None when unknown or expired.

        Raises CodeReplayed for a code already redeemed, after deleting the grant it made.
        """
        value = reveal(code)
        if not is_token(value):
            return None
        key = self.core.bucket_key("code", value)
        stored = await self.core.call(self.core.client.get(key))
        if stored is None:
            return None
        raw = as_bytes(stored)
        if _is_redeemed(raw):
            await self._redeem(key, b"")  # the revocation happens in the script, atomically
            raise CodeReplayed("a redeemed authorization code was presented again")
        record = decode(raw, AuthCode)
        if self.core.now() >= record.expires_unix:
            return None
        grant_id = unseal(record.gid_sealed, purpose=_CODE_GID, key=value)
        if grant_handle(grant_id) != record.grant:
            raise StoreCorrupt("a code's sealed grant does not match its grant")
        return CodeRead(record, raw, Secret(grant_id))

    async def consume_code(self, code: Presented, expected: bytes) -> bool:
        """Redeem a code only if it still holds exactly the bytes validated; one caller wins.

        The loser of a race finds it redeemed: a replay, so the grant is deleted and False.
        """
        value = reveal(code)
        if not is_token(value):
            return False
        return await self._redeem(self.core.bucket_key("code", value), expected) == "ok"

    async def _redeem(self, key: str, expected: bytes) -> str:
        status, _ = await self.core.script_status(
            "consume", [key, self.core.keys.grants], [expected]
        )
        if status not in ("ok", "gone", "replayed"):
            raise StoreCorrupt(f"the code script answered {status!r}")
        return status


def _is_redeemed(raw: bytes) -> bool:
    try:
        marker = msgspec.json.decode(raw, type=_Redeemed)
    except msgspec.DecodeError:
        return False  # an authorization code record, decoded strictly by the caller
    return marker.v == 1 and marker.redeemed
