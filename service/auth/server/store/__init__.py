"""Redis state of the first-party authorization server (see store.py for the entry point)."""

from ._core import StoreLimits
from .budgets import (
    AUTHORIZE,
    BROWSER,
    CLIENT_METADATA_FETCH,
    NEW_ANONYMOUS_SESSION,
    PASSKEY_BEGIN,
    PASSKEY_FINISH,
    Budget,
    BudgetRule,
)
from .errors import (
    CredentialRefused,
    GrantLimitReached,
    InvalidGrant,
    RateLimited,
    RefreshReused,
    ScopeRevoked,
    StoreCorrupt,
    StoreError,
    StoreUnavailable,
)
from .grants import CodeRead, GrantEntry, grant_handle
from .owner import owner_user_handle
from .refresh import Rotation
from .sessions import SessionView, SignedIn
from .store import OAuthStore

__all__ = [
    "AUTHORIZE",
    "BROWSER",
    "CLIENT_METADATA_FETCH",
    "NEW_ANONYMOUS_SESSION",
    "PASSKEY_BEGIN",
    "PASSKEY_FINISH",
    "Budget",
    "BudgetRule",
    "CodeRead",
    "CredentialRefused",
    "GrantEntry",
    "GrantLimitReached",
    "InvalidGrant",
    "OAuthStore",
    "RateLimited",
    "RefreshReused",
    "Rotation",
    "ScopeRevoked",
    "SessionView",
    "SignedIn",
    "StoreCorrupt",
    "StoreError",
    "StoreLimits",
    "StoreUnavailable",
    "grant_handle",
    "owner_user_handle",
]
