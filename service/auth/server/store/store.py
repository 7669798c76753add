"""OAuthStore: every piece of Redis state of the first-party authorization server, in parts."""

from __future__ import annotations

import time
from collections.abc import Callable

from ledger.store.connection import StoreClient

from ._core import StoreCore, StoreLimits
from .budgets import BudgetStore
from .grants import GrantStore
from .owner import OwnerStore
from .refresh import RefreshStore
from .registrations import RegistrationStore
from .sessions import SessionStore


class OAuthStore:
    """One owner's OAuth state in Redis: sessions, ceremonies, consents, codes, grants,
    refresh families, budgets, self-registered clients and the owner record, under
    angelos:oauth:{<hash>}:v1:.

    Built from a redis.asyncio client, the owner subject and the resource URL; `clock` (unix
    seconds) stamps records and decides the expiry checks made here, while the Lua scripts
    decide grant and refresh expiry with the Redis clock. It only holds the parts, all over one
    StoreCore; a consumer takes the parts it needs.
    """

    def __init__(
        self,
        client: StoreClient,
        owner_subject: str,
        resource: str,
        *,
        clock: Callable[[], float] = time.time,
        limits: StoreLimits | None = None,
    ) -> None:
        self.core = StoreCore(client, owner_subject, resource, clock=clock, limits=limits)
        self.budgets = BudgetStore(self.core)
        self.sessions = SessionStore(self.core)
        self.owner = OwnerStore(self.core)
        self.grants = GrantStore(self.core, self.budgets)
        self.refresh = RefreshStore(self.core, self.grants)
        self.registrations = RegistrationStore(self.core)
