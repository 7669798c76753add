"""OAuthStore: every piece of Redis state of the first-party authorization server."""

from __future__ import annotations

from .owner import OwnerOps
from .refresh import RefreshOps
from .sessions import SessionOps


class OAuthStore(SessionOps, RefreshOps, OwnerOps):
    """One owner's OAuth state in Redis: sessions, ceremonies, consents, codes, grants,
    refresh families, budgets and the owner record, under angelos:oauth:{<hash>}:v1:.

    Built from a redis.asyncio client, the owner subject and the resource URL; `clock` (unix
    seconds) stamps records and decides the expiry checks made here, while the Lua scripts
    decide grant and refresh expiry with the Redis clock.
    """
