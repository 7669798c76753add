"""The live application: configuration, gates and the resources operations use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from providers.mailbox import Mailbox
from service.config import Config, Gates
from service.principal import Principal

Handler = Callable[["AppContext", Principal, Any], Awaitable[msgspec.Struct]]
VERSION = "0.11.0"


@dataclass
class AppContext:
    """Everything one server process shares between calls."""

    config: Config
    gates: Gates
    mailbox: Mailbox | None
    store_configured: bool
    smtp_stores_sent: bool
    handlers: dict[type, Handler] = field(default_factory=dict)
    resource_metadata_url: str | None = None
    version: str = VERSION

    async def aclose(self) -> None:
        """Release network resources (pooled IMAP sessions)."""
        if self.mailbox is not None:
            await self.mailbox.aclose()
