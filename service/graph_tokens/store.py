"""The Graph grant's newest refresh token in Redis, encrypted: the RotationStore of `microsoft`.

Reading is one Lua script (nothing stored, a malformed state or the record), and so is writing:
a compare-and-swap on the exact record this process last saw, or on "nothing stored" for the
first one, that writes the record and its marker together. Everything that is not a clean
answer fails closed with ServiceUnavailable, and no message names a token or the key.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import redis.exceptions as rex

from ledger.store.connection import UNREACHABLE, StoreClient
from ledger.store.lua_scripts import LuaScripts
from providers.oauth2.rotation import StoredToken
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret

from .keys import marker_key, record_key
from .sealing import MAX_RECORD_BYTES, SealBroken, TokenSealer

DEFAULT_TIMEOUT_S: Final = 10.0
SCRIPTS: Final = LuaScripts("service.graph_tokens", ("load", "swap"))

_WHAT: Final = "the stored Microsoft refresh token"
_CORRUPT: Final = (
    f"{_WHAT} is incomplete or malformed (its record or marker is missing or altered); it is"
    " never repaired automatically: restore the store from a backup, or run `angelos"
    " microsoft-auth` and set MICROSOFT_REFRESH_TOKEN to start a new stored generation"
)
_OVERSIZE: Final = f"{_WHAT} is larger than 24 KiB and was not read"
_UNOPENED: Final = (
    f"{_WHAT} cannot be decrypted: MICROSOFT_TOKEN_ENCRYPTION_KEY is not the key it was stored"
    " with, or the record was altered"
)
_VANISHED: Final = (
    f"{_WHAT} disappeared from the store (data lost or rolled back); restart angelos to start"
    " again from MICROSOFT_REFRESH_TOKEN"
)


class RedisRefreshTokenStore:
    """One grant's encrypted refresh-token record and its marker in Redis (a RotationStore)."""

    def __init__(
        self,
        client: StoreClient,
        record_key: str,
        key: Secret,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._record_key = record_key
        self._keys = (record_key, marker_key(record_key))
        self._sealer = TokenSealer(key)
        self._timeout_s = timeout_s
        self._scripts = SCRIPTS.register(client)

    def __repr__(self) -> str:
        return f"RedisRefreshTokenStore({self._record_key!r})"

    @property
    def record_key(self) -> str:
        """The Redis key of the record (its marker is this + `:initialized`)."""
        return self._record_key

    async def load(self) -> StoredToken | None:
        """The stored token, or None when neither the record nor its marker exists."""
        status, record = await self._run("load", (MAX_RECORD_BYTES,))
        if status == "empty":
            return None
        return self._opened(status, record)

    async def swap(self, previous: StoredToken | None, new: Secret) -> StoredToken:
        """Store `new` if the store holds exactly `previous`; else return what it holds."""
        try:
            sealed = self._sealer.seal(new, self._record_key)
        except SealBroken:
            raise ServiceUnavailable("the new Microsoft refresh token cannot be stored") from None
        expected = "" if previous is None else previous.record
        status, record = await self._run("swap", (MAX_RECORD_BYTES, expected, sealed))
        if status == "swapped":
            return StoredToken(new, sealed)
        if status == "vanished":
            raise ServiceUnavailable(_VANISHED)
        return self._opened(status, record)

    def _opened(self, status: str, record: str | None) -> StoredToken:
        if status == "oversize":
            raise ServiceUnavailable(_OVERSIZE)
        if status != "stored" or record is None:
            raise ServiceUnavailable(_CORRUPT)
        try:
            token = self._sealer.open(record, self._record_key)
        except SealBroken:
            unopened = True
        else:
            unopened = False
        if unopened:  # raised outside the except block: nothing of the record rides along
            raise ServiceUnavailable(_UNOPENED)
        return StoredToken(token, record)

    async def _run(self, name: str, args: tuple[int | str, ...]) -> tuple[str, str | None]:
        failure = ""
        # Each failure is raised after its except block, so no redis error rides along.
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._scripts[name](self._keys, args)
        except TimeoutError:
            failure = "did not answer in time"
        except UNREACHABLE:
            failure = "did not answer"
        except rex.RedisError:
            failure = "refused a command"
        if failure:
            raise ServiceUnavailable(f"the Microsoft refresh token store (Redis) {failure}")
        return _reply(reply)


def _reply(reply: Any) -> tuple[str, str | None]:
    """(status, record) from a script's {status[, record]}; anything else is malformed."""
    if not isinstance(reply, list) or not 1 <= len(reply) <= 2:
        raise ServiceUnavailable(_CORRUPT)
    parts = [_text(part) for part in reply]
    return parts[0], parts[1] if len(parts) == 2 else None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        # Records are ASCII; anything else fails to open later rather than here.
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    raise ServiceUnavailable(_CORRUPT)


def refresh_token_store(
    client: StoreClient,
    tenant: str,
    client_id: str,
    account_id: str,
    mail_from: str,
    initial_refresh_token: Secret,
    encryption_key: Secret,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> RedisRefreshTokenStore:
    """The store of the Graph grant named by these settings, on `client`."""
    key = record_key(tenant, client_id, account_id, mail_from, initial_refresh_token)
    return RedisRefreshTokenStore(client, key, encryption_key, timeout_s=timeout_s)
