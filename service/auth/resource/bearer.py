"""The bearer check in front of /mcp: one Authorization header, the token verified, or a challenge.

Tokens are read from the Authorization header only: a query parameter named access_token is
refused even beside a valid header, and cookies and bodies are never read. The verified
Principal travels to the tool handlers in the ASGI scope's state.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any, Final
from urllib.parse import parse_qsl

import structlog
from starlette.datastructures import Headers
from starlette.responses import Response

from schemas.scopes import BASE_SCOPE
from service.auth.resource.challenge import challenge
from service.auth.resource.verifier import AuthFailure, TokenVerifier
from service.principal import Principal

PRINCIPAL_KEY: Final = "angelos.principal"
log = structlog.get_logger("angelos.auth")


class BearerGate:
    """Admit a request with a valid token, or answer 401/403 with the exact challenge."""

    def __init__(
        self, verifier: TokenVerifier, metadata_url: str, initial_scopes: tuple[str, ...]
    ) -> None:
        self.verifier = verifier
        self.metadata_url = metadata_url
        self.initial_scope = " ".join(initial_scopes)

    async def admit(self, scope: MutableMapping[str, Any], headers: Headers) -> Response | None:
        """Store the Principal in scope["state"] and return None, or return the refusal."""
        if _has_query_token(scope.get("query_string", b"")):
            return self._unauthorized("query-token", error=True)
        values = headers.getlist("authorization")
        if len(values) != 1:
            # No error code: the client simply has not authenticated (yet).
            return self._unauthorized("no-credentials" if not values else "two-credentials")
        kind, _, rest = values[0].partition(" ")
        token = rest.lstrip(" ")
        if kind.lower() != "bearer" or not token:
            return self._unauthorized("scheme", error=True)
        try:
            principal = await self.verifier.principal(token)
        except AuthFailure as exc:
            if exc.status == 403:
                return self._forbidden(exc.rule)
            return self._unauthorized(exc.rule, error=True)
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        return None

    def _unauthorized(self, rule: str, *, error: bool = False) -> Response:
        log.info("bearer_refused", status=401, rule=rule)
        value = challenge(self.metadata_url, self.initial_scope, "invalid_token" if error else None)
        return _json(401, "Unauthorized", value)

    def _forbidden(self, rule: str) -> Response:
        log.info("bearer_refused", status=403, rule=rule)
        # Initial-scope preferences never widen a 403: it asks for the base scope only.
        return _json(
            403, "Forbidden", challenge(self.metadata_url, BASE_SCOPE, "insufficient_scope")
        )


def principal_in(scope: MutableMapping[str, Any]) -> Principal:
    """Return the Principal the gate stored for this request."""
    principal: Principal = scope["state"][PRINCIPAL_KEY]
    return principal


def _has_query_token(query: bytes) -> bool:
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return any(name == "access_token" for name, _ in pairs)


def _json(status: int, word: str, www_authenticate: str) -> Response:
    return Response(
        json.dumps({"error": word}),
        status_code=status,
        media_type="application/json",
        headers={"WWW-Authenticate": www_authenticate, "Cache-Control": "no-store"},
    )
