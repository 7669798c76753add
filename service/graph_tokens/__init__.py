"""The encrypted Redis store of a Microsoft Graph grant's rotated refresh tokens."""

from .keys import marker_key, record_key
from .sealing import MAX_RECORD_BYTES, SealBroken, TokenSealer
from .store import RedisRefreshTokenStore, refresh_token_store

__all__ = [
    "MAX_RECORD_BYTES",
    "RedisRefreshTokenStore",
    "SealBroken",
    "TokenSealer",
    "marker_key",
    "record_key",
    "refresh_token_store",
]
