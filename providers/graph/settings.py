"""What the Graph provider needs from the configuration: the account, its tokens, its keys."""

from __future__ import annotations

from dataclasses import dataclass

from providers.oauth2.source import TokenSource
from schemas.secret import Secret

PROVIDER = "microsoft_graph"


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
