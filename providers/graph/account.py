"""The Graph account a deployment serves: its settings, and the identity every operation checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from providers.graph.answers import get, read_body
from providers.graph.http import ME, GraphHttp
from providers.graph.wire import User, decode
from providers.oauth2.source import TokenSource
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret

PROVIDER: Final = "microsoft_graph"
MISMATCH: Final = (
    "the Microsoft account the token belongs to is not the configured one "
    "(MICROSOFT_ACCOUNT_ID and MAIL_FROM must match /me); nothing was done"
)


@dataclass(frozen=True)
class GraphSettings:
    """One delegated Graph mailbox: `/me` must be `account_id` with primary mail `mail_from`."""

    account_id: str
    mail_from: str
    tokens: TokenSource
    cursor_key: Secret  # keys the search cursors' HMAC (the client secret)
    timeout_s: float = 30.0

    def __repr__(self) -> str:
        return f"GraphSettings(account_id={self.account_id!r}, timeout_s={self.timeout_s})"


async def check_identity(http: GraphHttp, settings: GraphSettings) -> None:
    """Raise ServiceUnavailable unless `/me` has the configured id and primary mail."""
    answer = await get(http, ME, {"$select": "id,mail,userPrincipalName"})
    user = decode(read_body(answer), User)
    mail = user.mail or ""
    if user.id != settings.account_id or mail.lower() != settings.mail_from.lower():
        raise ServiceUnavailable(MISMATCH)
