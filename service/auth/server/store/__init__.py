"""Redis state of the first-party authorization server: OAuthStore (store.py) holds its six
parts, SessionStore, GrantStore, RefreshStore, OwnerStore, BudgetStore and
RegistrationStore, over one StoreCore."""

from ._core import StoreLimits
from .budgets import (
    ANONYMOUS_BEGIN,
    ANONYMOUS_FINISH,
    AUTHORIZE,
    BROWSER,
    CLIENT_METADATA_FETCH,
    CLIENT_METADATA_SOURCE,
    PASSKEY_BEGIN,
    PASSKEY_FINISH,
    REGISTRATION,
    REGISTRATION_SOURCE,
    Budget,
    BudgetRule,
    BudgetStore,
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
from .grants import CodeRead, GrantEntry, GrantStore, grant_handle
from .owner import OwnerStore, owner_user_handle
from .refresh import RefreshStore, Rotation
from .registrations import RegistrationGone, RegistrationsFull, RegistrationStore
from .sessions import SessionStore, SessionView, SignedIn
from .store import OAuthStore

__all__ = [
    "ANONYMOUS_BEGIN",
    "ANONYMOUS_FINISH",
    "AUTHORIZE",
    "BROWSER",
    "CLIENT_METADATA_FETCH",
    "CLIENT_METADATA_SOURCE",
    "PASSKEY_BEGIN",
    "PASSKEY_FINISH",
    "REGISTRATION",
    "REGISTRATION_SOURCE",
    "Budget",
    "BudgetRule",
    "BudgetStore",
    "CodeRead",
    "CredentialRefused",
    "GrantEntry",
    "GrantLimitReached",
    "GrantStore",
    "InvalidGrant",
    "OAuthStore",
    "OwnerStore",
    "RateLimited",
    "RefreshReused",
    "RefreshStore",
    "RegistrationGone",
    "RegistrationStore",
    "RegistrationsFull",
    "Rotation",
    "ScopeRevoked",
    "SessionStore",
    "SessionView",
    "SignedIn",
    "StoreCorrupt",
    "StoreError",
    "StoreLimits",
    "StoreUnavailable",
    "grant_handle",
    "owner_user_handle",
]
