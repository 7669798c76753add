"""The authorization server's one refusal, raised where a request is refused.

Each surface renders it in one place: `routes.oauth_error` (the machine endpoints' JSON),
`routes.AuthorizationServer._authorize` (the redirect back to the client, or the browser's
refusal page) and the browser's endpoint wrapper (`browser/endpoint.py`: a page or JSON).
The store's own exceptions (`store/errors.py`) stay the store's; its callers translate them
into an OAuthError.
"""

from __future__ import annotations

from typing import Final

RETRY_AFTER: Final = "60"  # the Retry-After every 429 carries, on every surface


class OAuthError(Exception):
    """A refused request: HTTP status, error code, and (for a 429) the budget's seconds to wait."""

    def __init__(self, status: int, error: str, retry_after_s: int = 0) -> None:
        super().__init__(f"{status} {error}")
        self.status = status
        self.error = error
        self.retry_after_s = retry_after_s

    def fields(self) -> tuple[object, ...]:
        """What tells two refusals apart."""
        return (self.status, self.error, self.retry_after_s)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, OAuthError)
            and type(other) is type(self)
            and other.fields() == self.fields()
        )

    def __hash__(self) -> int:
        return hash((type(self), self.fields()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.fields()!r}"


class AuthorizeError(OAuthError):
    """A refused authorization request: with a redirect URI it goes back to the client (`error`,
    `iss` and the state when it is valid), without one it is a page for the owner naming the
    failed check, its `rule` (400, or 503/429 when a client's metadata could not be had)."""

    def __init__(
        self,
        error: str,
        redirect_uri: str | None = None,
        state: str | None = None,
        *,
        rule: str = "",
        status: int = 400,
    ) -> None:
        super().__init__(status, error)
        self.redirect_uri = redirect_uri
        self.state = state
        self.rule = rule

    def fields(self) -> tuple[object, ...]:
        """What tells two refusals apart."""
        return (self.status, self.error, self.redirect_uri, self.state, self.rule)
