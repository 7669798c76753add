"""What a write must be confirmed by before the ledger acts on it: replicas (`WAIT`) and, where
the server has it, the fsync of the append-only file (`WAITAOF`).

Both commands count the writes of the connection they run on, so they are sent on the
connection that ran the script, right behind it (ledger/store/batch.py): asked on another
pooled connection, they would confirm that connection's older writes instead.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from ledger.store.wire import Command


class Acknowledgment(Struct, frozen=True, kw_only=True):
    """`replicas` that must hold a write (`WAIT`), and whether its local fsync is waited for."""

    replicas: int = 0  # SEND_LEDGER_WAIT_REPLICAS (or SEND_LEDGER_WAITAOF_REPLICAS)
    waitaof: bool = False  # the server has WAITAOF and appendfsync is not always
    timeout_ms: int = 2000  # SEND_LEDGER_FSYNC_TIMEOUT_MS

    @property
    def required(self) -> bool:
        """Tell whether writes wait for any confirmation at all."""
        return self.waitaof or self.replicas > 0

    def command(self) -> Command:
        """The one command sent behind a batch of writes."""
        if self.waitaof:
            return ("WAITAOF", 1, self.replicas, self.timeout_ms)
        return ("WAIT", self.replicas, self.timeout_ms)

    def confirms(self, reply: Any) -> bool:
        """Tell whether the command's reply confirms every write before it on its connection."""
        if isinstance(reply, BaseException):
            return False
        if self.waitaof:
            return int(reply[0]) >= 1 and int(reply[1]) >= self.replicas
        return int(reply) >= self.replicas


NONE = Acknowledgment()
