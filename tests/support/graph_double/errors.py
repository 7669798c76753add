"""Graph's error answers: the exception handlers raise and the body Graph sends with it."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

# The code Graph names for a status when a fault gives none.
DEFAULT_CODES: dict[int, str] = {
    400: "BadRequest",
    401: "InvalidAuthenticationToken",
    403: "ErrorAccessDenied",
    404: "ErrorItemNotFound",
    409: "ErrorFolderExists",
    429: "TooManyRequests",
    500: "generalException",
    502: "BadGateway",
    503: "ServiceNotAvailable",
    504: "GatewayTimeout",
}


class GraphError(Exception):
    """An answer in Graph's error shape: status, error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def bad_request(message: str, code: str = "BadRequest") -> GraphError:
    """A 400 with Graph's generic code unless another is given."""
    return GraphError(400, code, message)


def not_found() -> GraphError:
    """Graph's 404 for an id that names nothing (or nothing of that kind)."""
    return GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")


def error_body(code: str, message: str, request_id: str, client_request_id: str | None) -> bytes:
    """`{"error": {"code", "message", "innerError": {...}}}` exactly as Graph shapes it."""
    inner = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        "request-id": request_id,
        "client-request-id": client_request_id or request_id,
    }
    return json.dumps({"error": {"code": code, "message": message, "innerError": inner}}).encode()


def new_request_id() -> str:
    """A request-id like Graph's (a random UUID)."""
    return str(uuid.uuid4())
