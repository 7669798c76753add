"""The send ledger as the owner's approval page reaches it: which store, and written as whom.

Kept apart from the browser package (which loads py_webauthn) so that the HTTP wiring can name
it. The source answers None while sending is not usable (no durable store, or the store's
monitor has stopped it): the page then says sending is not available and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledger.store.ledger_store import LedgerStore


@dataclass(frozen=True)
class SendLedger:
    """The ledger store and the actor (`api:<instance>`) an approval is recorded by."""

    store: LedgerStore
    actor: str


SendLedgerSource = Callable[[], SendLedger | None]


def no_send_ledger() -> SendLedger | None:
    """The source of a browser flow without sending: never a ledger."""
    return None
