"""A `microsoft` mailbox: the Graph provider, its token source and its store of refresh tokens.

The mailbox is built with the configuration (no network), but the rotated refresh tokens live
in the ledger's Redis, which the server opens later: the token source gets a store that refuses
until it is attached, once, at start. A call that comes before then fails closed, like one whose
store is unreachable; no token request is made with a refresh token that may be stale.
"""

from __future__ import annotations

from typing import Final

from ledger.store.connection import StoreClient
from providers.graph.account import GraphSettings
from providers.graph.mailbox import GraphMailbox
from providers.oauth2.rotation import RotationStore, StoredToken
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from service.config import MailConfig
from service.mail_login import graph_token_store, graph_tokens

NOT_ATTACHED: Final = "the Microsoft token store is not open yet (the ledger store starts first)"


class AttachedLater:
    """A RotationStore that refuses until the real one is attached."""

    def __init__(self) -> None:
        self._store: RotationStore | None = None

    def attach(self, store: RotationStore) -> None:
        """Use `store` from now on (once, at start)."""
        self._store = store

    async def load(self) -> StoredToken | None:
        """The attached store's token; refused before it is attached."""
        if self._store is None:
            raise ServiceUnavailable(NOT_ATTACHED)
        return await self._store.load()

    async def swap(self, previous: StoredToken | None, new: Secret) -> StoredToken:
        """Swap in the attached store; refused before it is attached."""
        if self._store is None:
            raise ServiceUnavailable(NOT_ATTACHED)
        return await self._store.swap(previous, new)


def build_graph_mailbox(mail: MailConfig) -> tuple[GraphMailbox, AttachedLater]:
    """The Graph mailbox of a `microsoft` configuration and the store its tokens wait for."""
    assert mail.graph is not None and mail.oauth is not None  # the loader requires both
    assert mail.oauth.client_secret is not None
    rotation = AttachedLater()
    settings = GraphSettings(
        account_id=mail.graph.account_id,
        mail_from=mail.from_addr,
        tokens=graph_tokens(mail, rotation),
        cursor_key=mail.oauth.client_secret,
        timeout_s=mail.timeout_s,
    )
    return GraphMailbox(settings), rotation


def attach_token_store(rotation: AttachedLater, client: StoreClient, mail: MailConfig) -> None:
    """Give a Graph mailbox's token source its encrypted store on the ledger's Redis."""
    rotation.attach(graph_token_store(client, mail))
