"""What every part of the OAuth store shares: the client, keys, clock, limits, scripts and the
record codec."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import msgspec
import redis.exceptions as rex

from ledger.store.connection import UNREACHABLE, StoreClient
from ledger.store.lua_scripts import Arg, LuaScripts
from schemas.secret import Secret
from service.wire.b64url import encodes_bytes

from .errors import StoreCorrupt, StoreUnavailable
from .keys import TOKEN_BYTES, OAuthKeys, sha256_hex

R = TypeVar("R", bound=msgspec.Struct)

ANONYMOUS_LIFETIME_S: Final = 10 * 60
SESSION_IDLE_S: Final = 30 * 60
SESSION_LIFETIME_S: Final = 12 * 3600
CHALLENGE_LIFETIME_S: Final = 5 * 60
CONSENT_LIFETIME_S: Final = 10 * 60
CODE_LIFETIME_S: Final = 5 * 60
GRANT_LIFETIME_S: Final = 30 * 86400
MAX_RECORD_BYTES: Final = 32 * 1024
MAX_GRANT_BYTES: Final = 2048
MAX_OWNER_BYTES: Final = 128 * 1024
MAX_CREDENTIALS: Final = 8
MAX_GRANTS: Final = 128
ROTATION_CAP: Final = 10_000

Presented = Secret | str  # a secret as the browser or client presented it

SCRIPTS: Final = LuaScripts(
    "service.auth.server.store",
    (
        "budget",
        "budgets",
        "sign_in",
        "consume",
        "swap",
        "rotate_session",
        "put_consent",
        "bootstrap",
        "grant_create",
        "grant_list",
        "grant_read",
        "refresh_issue",
        "refresh_rotate",
        "register",
    ),
)


class StoreLimits(msgspec.Struct, frozen=True):
    """The numbers that bound the store; tests lower them, deployments keep the defaults."""

    max_grants: int = MAX_GRANTS
    rotation_cap: int = ROTATION_CAP
    grant_lifetime_s: int = GRANT_LIFETIME_S
    grant_budget: int = 120  # token requests per grant per window
    grant_budget_window_s: int = 60
    registration_pending_s: int = 10 * 60  # a self-registered client unconsented
    max_pending_registrations: int = 32


def reveal(value: Presented) -> str:
    """Return the text of a presented secret."""
    return value.reveal() if isinstance(value, Secret) else value


def is_token(value: str) -> bool:
    """Say whether a presented value has the shape of our tokens (43 base64url characters)."""
    return encodes_bytes(value, TOKEN_BYTES)


class StoreCore:
    """What every part of the store holds: the client, owner, resource, keys, clock, limits and
    the registered scripts."""

    def __init__(
        self,
        client: StoreClient,
        owner_subject: str,
        resource: str,
        *,
        clock: Callable[[], float] = time.time,
        limits: StoreLimits | None = None,
    ) -> None:
        if not owner_subject or not resource:
            raise ValueError("the OAuth store needs the owner subject and the resource")
        self.client = client
        self.owner_subject = owner_subject
        self.resource = resource
        self.keys = OAuthKeys(owner_subject)
        self.limits = limits or StoreLimits()
        self._clock = clock
        self._scripts = SCRIPTS.register(client)

    def now(self) -> int:
        """Return the store clock in whole unix seconds."""
        return int(self._clock())

    async def call(self, awaitable: Awaitable[Any]) -> Any:
        """Await one redis-py call, mapping its failures to StoreUnavailable."""
        try:
            return await awaitable
        except UNREACHABLE:
            raise StoreUnavailable("the OAuth store did not answer") from None
        except rex.RedisError:
            raise StoreUnavailable("the OAuth store refused a command") from None

    async def script(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run one of the store's Lua scripts and return its raw reply."""
        return await self.call(self._scripts[name](keys, args))

    async def script_status(
        self, name: str, keys: Sequence[str], args: Sequence[Arg]
    ) -> tuple[str, list[Any]]:
        """Run a script answering {status, ...}; return the status and the rest."""
        reply = await self.script(name, keys, args)
        if not isinstance(reply, list) or not reply:
            raise StoreCorrupt("the OAuth store answered a script unexpectedly")
        status = text(reply[0])
        if status == "corrupt":
            raise StoreCorrupt("stored OAuth state is malformed")
        return status, reply[1:]

    def bucket_key(self, bucket: str, secret: str) -> str:
        """Return the key of a record stored under SHA-256 of a secret."""
        return self.keys.bucket(bucket, sha256_hex(secret))


def text(value: Any) -> str:
    """Return a reply element as text (the client may or may not decode responses)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return value
    raise StoreCorrupt("the OAuth store answered with an unexpected type")


def as_bytes(value: Any) -> bytes:
    """Return a stored value as bytes, whether or not the client decodes responses."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise StoreCorrupt("the OAuth store answered with an unexpected type")


def encode(record: msgspec.Struct, limit: int = MAX_RECORD_BYTES) -> bytes:
    """Encode a record as JSON, refusing one larger than its bucket allows."""
    data = msgspec.json.encode(record)
    if len(data) > limit:
        raise ValueError("the OAuth record is larger than its limit")
    return data


def decode(raw: Any, kind: type[R], limit: int = MAX_RECORD_BYTES) -> R:
    """Decode a stored record strictly; anything else is corrupt state (fails closed)."""
    data = as_bytes(raw)
    if len(data) > limit:
        raise StoreCorrupt("a stored OAuth record is larger than its limit")
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.DecodeError:
        raise StoreCorrupt("a stored OAuth record is malformed") from None
