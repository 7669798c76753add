"""Refresh token families: issue on code exchange, rotate in one script, revoke on replay.

Every decision of a rotation (binding, expiry, replay, scopes, rotation cap, budget) is taken in
one Lua script with the Redis clock. The script receives the token record exactly as read here,
so this side can re-seal the grant ID under the new token without ever storing it raw.
"""

from __future__ import annotations

import secrets
from typing import Final

import msgspec

from schemas.secret import Secret

from ._core import Presented, StoreCore, as_bytes, decode, encode, is_token, reveal
from .budgets import retry_after_s
from .errors import InvalidGrant, RateLimited, RefreshReused, ScopeRevoked, StoreCorrupt
from .grants import GrantStore, grant_handle
from .keys import new_token, seal, sha256_hex, unseal
from .records import FamilyRecord, Grant, RefreshRecord, Scopes

_REFRESH_GID: Final = "refresh-grant"


class Rotation(msgspec.Struct, frozen=True):
    """A rotation's result: the new refresh token, the grant and the new access token's scopes."""

    refresh_token: Secret
    grant_id: Secret
    grant: Grant
    scopes: Scopes


class RefreshStore:
    """Issuing and rotating refresh tokens."""

    def __init__(self, core: StoreCore, grants: GrantStore) -> None:
        self.core = core
        self.grants = grants

    async def issue(self, grant_id: Presented, client_id: str) -> Secret:
        """Start the grant's refresh family; return its first token (valid to the grant deadline).

        Raises InvalidGrant when the grant is gone, expired or another client's.
        """
        grant = await self.grants.get(grant_id)
        if grant is None or grant.client_id != client_id:
            raise InvalidGrant("the grant is not active")
        token = new_token()
        family = secrets.token_hex(32)
        handle = grant_handle(grant_id)
        record = RefreshRecord(
            v=1,
            family=family,
            grant=handle,
            subject=grant.subject,
            client_id=client_id,
            resource=grant.resource,
            gid_sealed=seal(reveal(grant_id), purpose=_REFRESH_GID, key=token),
            created_unix=self.core.now(),
            expires_unix=grant.expires_unix,
        )
        family_record = FamilyRecord(
            v=1, grant=handle, current=sha256_hex(token), rotations=0, state="active"
        )
        status, _ = await self.core.script_status(
            "refresh_issue",
            [
                self.core.keys.grants,
                self.core.bucket_key("refresh", token),
                self.core.keys.bucket("family", family),
            ],
            [
                handle,
                client_id,
                self.core.resource,
                self.core.owner_subject,
                encode(record),
                encode(family_record),
                grant.expires_unix,
            ],
        )
        if status != "ok":
            raise InvalidGrant("the grant is not active")
        return Secret(token)

    async def rotate(
        self, token: Presented, client_id: str, scopes: Scopes | None = None
    ) -> Rotation:
        """Spend a refresh token and return its successor.

        `scopes` (canonical, optional) narrows the new access token; scopes beyond the grant
        revoke it (ScopeRevoked). Raises RefreshReused for a spent token (family revoked, grant
        deleted, whatever the budget), InvalidGrant for anything missing, expired, revoked or
        bound elsewhere and at the rotation cap (which revokes), RateLimited when the grant's
        budget is spent, StoreError when Redis fails or the state is malformed.
        """
        old = reveal(token)
        if not is_token(old):
            raise InvalidGrant("malformed refresh token")
        old_key = self.core.bucket_key("refresh", old)
        stored = await self.core.call(self.core.client.get(old_key))
        if stored is None:
            raise InvalidGrant("unknown or expired refresh token")
        raw = as_bytes(stored)
        record = decode(raw, RefreshRecord)
        grant_id = unseal(record.gid_sealed, purpose=_REFRESH_GID, key=old)
        if grant_handle(grant_id) != record.grant:
            raise StoreCorrupt("a refresh token's sealed grant does not match its grant")
        new = new_token()
        successor = msgspec.structs.replace(
            record,
            gid_sealed=seal(grant_id, purpose=_REFRESH_GID, key=new),
            created_unix=self.core.now(),
        )
        status, rest = await self.core.script_status(
            "refresh_rotate",
            [
                old_key,
                self.core.bucket_key("refresh", new),
                self.core.keys.bucket("family", record.family),
                self.core.keys.grants,
                self.core.bucket_key("rate", f"grant-tokens:{record.grant}"),
            ],
            [
                raw,
                encode(successor),
                sha256_hex(old),
                sha256_hex(new),
                client_id,
                self.core.resource,
                self.core.owner_subject,
                " ".join(scopes or ()),
                self.core.limits.rotation_cap,
                self.core.limits.grant_budget,
                self.core.limits.grant_budget_window_s * 1000,
            ],
        )
        if status == "ok" and len(rest) == 1:
            grant = decode(rest[0], Grant)
            chosen = scopes if scopes else grant.scopes
            return Rotation(Secret(new), Secret(grant_id), grant, chosen)
        if status == "reused":
            raise RefreshReused("a spent refresh token was presented; the grant is revoked")
        if status == "scope":
            raise ScopeRevoked("scopes beyond the grant were requested; the grant is revoked")
        if status in ("invalid", "cap"):
            raise InvalidGrant("the refresh token is not usable")
        if status == "limited" and len(rest) == 1:
            raise RateLimited(retry_after_s(rest[0]))
        raise StoreCorrupt(f"the rotation script answered {status!r}")
