"""What a mail login needs from OAuth: a current access token, and a way to say it failed.

IMAP and SMTP take a `TokenSource` in their settings (instead of a password) and log in with
SASL XOAUTH2. An authentication failure invalidates only the generation that failed, so a
token refreshed meanwhile by another connection is kept.
"""

from __future__ import annotations

from typing import Protocol

from msgspec import Struct

from schemas.secret import Secret


class AccessToken(Struct, frozen=True):
    """One access token as the cache hands it out."""

    value: Secret
    generation: int  # counts refreshes; invalidate() names the one that failed
    fresh: bool  # fetched for this request (not a cached copy): a refusal is not staleness


class TokenSource(Protocol):
    """A source of access tokens for one mailbox login."""

    @property
    def recovery(self) -> str:
        """What the owner does when the tokens are refused (e.g. run `angelos google-auth`)."""
        ...

    async def token(self) -> AccessToken:
        """A usable access token; raises ServiceUnavailable when none can be had."""
        ...

    def invalidate(self, generation: int) -> None:
        """Forget the token of `generation` (a server refused it); later generations stay."""
        ...


def xoauth2_initial_response(username: str, token: Secret) -> bytes:
    """The SASL XOAUTH2 initial client response, before base64 (RFC-less, Google's format)."""
    return f"user={username}\x01auth=Bearer {token.reveal()}\x01\x01".encode()
