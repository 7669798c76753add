"""What the OAuth store raises; the endpoints map StoreError to 503 and the rest to OAuth errors."""

from __future__ import annotations


class StoreError(Exception):
    """The OAuth state could not be used: Redis failed or the stored state is malformed."""


class StoreUnavailable(StoreError):
    """Redis did not answer or refused a command."""


class StoreCorrupt(StoreError):
    """A stored record or counter is malformed; there is no migration, so this fails closed."""


class InvalidGrant(Exception):
    """The code, refresh token or grant is missing, expired, replayed or bound to someone else."""


class RefreshReused(InvalidGrant):
    """A spent refresh token came back: its family is revoked and its grant deleted."""


class CodeReplayed(InvalidGrant):
    """A redeemed authorization code came back: the grant it made is deleted."""


class ScopeRevoked(Exception):
    """A refresh asked for scopes beyond its grant: the grant is revoked (invalid_scope)."""


class RateLimited(Exception):
    """A budget is exhausted; retry_after_s says when its window ends."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__("rate limit reached")
        self.retry_after_s = retry_after_s


class GrantLimitReached(Exception):
    """The owner already has the maximum number of active grants."""


class CredentialRefused(Exception):
    """A passkey cannot be added: the credential limit is reached or its ID is already enrolled."""
