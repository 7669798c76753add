"""Where the owner approves one prepared send with a passkey."""

from __future__ import annotations

from typing import Final

from schemas.send_policy import RequiredApproval, accepts
from service.context import AppContext

APPROVE_PATH: Final = "/oauth/approve/"


def approval_url(app: AppContext, pid: str, required: RequiredApproval | None) -> str | None:
    """The passkey approval page of a preparation requiring `required`; None when a passkey
    cannot approve it or the first-party server is off."""
    config = app.config
    if required is None or not accepts(required, "passkey"):
        return None
    if config.first_party is None or config.first_party_origin is None:
        return None
    return f"{config.first_party_origin}{APPROVE_PATH}{pid}"
