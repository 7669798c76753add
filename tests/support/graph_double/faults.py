"""Faults a test injects into the double's answers, and the record of every exchange."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Status:
    """Answer `code` in Graph's error shape without applying the request."""

    code: int
    error_code: str | None = None  # None: the code Graph names for that status
    retry_after: int | None = None  # seconds, sent as Retry-After


@dataclass(frozen=True)
class ApplyThenStatus:
    """Apply the request's effect, then answer `code` anyway (e.g. a 503 after a send queued)."""

    code: int
    error_code: str | None = None


@dataclass(frozen=True)
class Drop:
    """Read the whole request (applying it when `apply`), then abort the TCP connection."""

    apply: bool


@dataclass(frozen=True)
class Delay:
    """Answer normally after `seconds` (without `apply`: applied only if the client stayed)."""

    # With `apply` the effect happens at once and only the answer waits; without it the request
    # waits first, so a client that gives up meanwhile leaves no effect behind.

    seconds: float
    apply: bool = True


Fault = Status | ApplyThenStatus | Drop | Delay


@dataclass
class Injection:
    """A fault for the next `times` requests whose method and path (after /v1.0) match."""

    method: str
    pattern: re.Pattern[str]
    fault: Fault
    times: int

    def matches(self, method: str, route: str) -> bool:
        """Whether this injection is for that request."""
        return self.method in ("*", method.upper()) and bool(self.pattern.fullmatch(route))


@dataclass
class Exchange:
    """One request as the double received it, and what it answered (status 0: no answer)."""

    method: str
    path: str  # as received, decoded: /v1.0/me/messages/AAMk...
    query: list[tuple[str, str]]  # decoded, in order
    headers: dict[str, str]
    body: bytes
    status: int = 0
    response_body: bytes = b""
    model: str | None = None  # the msgraph-sdk model class the JSON answer is
    fault: Fault | None = field(default=None, repr=False)

    @property
    def route(self) -> str:
        """The path after /v1.0 (what inject() patterns match), or the whole path elsewhere."""
        return self.path[len("/v1.0") :] if self.path.startswith("/v1.0/") else self.path

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (bodies in base64) for tests/graph_sdk/check.py."""
        return {
            "method": self.method,
            "path": self.path,
            "query": [list(pair) for pair in self.query],
            "headers": self.headers,
            "body": base64.b64encode(self.body).decode(),
            "status": self.status,
            "response_body": base64.b64encode(self.response_body).decode(),
            "model": self.model,
        }
