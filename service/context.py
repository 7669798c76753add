"""The live application: configuration, gates and the resources operations use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ledger.ids import new_id
from providers.mailbox import Mailbox
from service.archive_task import ArchiveTask, start_archive
from service.config import Config, Gates
from service.graph_mailbox import AttachedLater
from service.principal import Principal
from service.recovery_task import RecoveryTask, start_recovery
from service.sending import Sending, start_sending

Handler = Callable[["AppContext", Principal, Any], Awaitable[msgspec.Struct]]
VERSION = "0.11.0"


@dataclass
class AppContext:
    """Everything one server process shares between calls."""

    config: Config
    gates: Gates
    mailbox: Mailbox | None
    smtp_stores_sent: bool
    handlers: dict[type, Handler] = field(default_factory=dict)
    resource_metadata_url: str | None = None
    version: str = VERSION
    sending: Sending = field(default_factory=Sending)
    instance_id: str = field(default_factory=new_id)
    recovery: RecoveryTask | None = None
    archive: ArchiveTask | None = None
    graph_token_store: AttachedLater | None = None  # a microsoft mailbox's, attached at start

    @property
    def store_configured(self) -> bool:
        """Tell whether a ledger store exists (send_status reads it even when sending is off)."""
        return self.sending.store is not None

    async def start(self) -> None:
        """Open the send ledger (store, self-check, lease) and start recovery."""
        self.sending = await start_sending(self.config, self.mailbox, self.graph_token_store)
        self.recovery = start_recovery(self.config.store, self.sending)
        self.archive = start_archive(self.config.store, self.sending)

    async def aclose(self) -> None:
        """Finish running dispatches, release the lease and the connections."""
        if self.recovery is not None:
            await self.recovery.stop()
        if self.archive is not None:
            await self.archive.stop()
        await self.sending.aclose()
        if self.mailbox is not None:
            await self.mailbox.aclose()
