"""The identity every Graph operation checks first: `/me` must be the configured account."""

from __future__ import annotations

from providers.graph.answers import get, read_body
from providers.graph.http import ME, GraphHttp
from providers.graph.settings import GraphSettings
from providers.graph.wire import User, decode
from schemas.errors import ServiceUnavailable

MISMATCH = (
    "the Microsoft account the token belongs to is not the configured one "
    "(MICROSOFT_ACCOUNT_ID and MAIL_FROM must match /me); nothing was done"
)


async def check_identity(http: GraphHttp, settings: GraphSettings) -> None:
    """Raise ServiceUnavailable unless `/me` has the configured id and primary mail."""
    answer = await get(http, ME, {"$select": "id,mail,userPrincipalName"})
    user = decode(read_body(answer), User)
    mail = user.mail or ""
    if user.id != settings.account_id or mail.lower() != settings.mail_from.lower():
        raise ServiceUnavailable(MISMATCH)
