"""Where the owner approves one prepared send with a passkey."""

from __future__ import annotations

from typing import Final

from service.context import AppContext

APPROVE_PATH: Final = "/oauth/approve/"


def approval_url(app: AppContext, pid: str) -> str | None:
    """The passkey approval page of one preparation, or None without the first-party server."""
    config = app.config
    if config.first_party is None or config.first_party_origin is None:
        return None
    return f"{config.first_party_origin}{APPROVE_PATH}{pid}"
