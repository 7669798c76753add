"""Read the SMTP sink's transaction log ($MAILTEST_SMTP_SPOOL/transactions.jsonl).

One line per DATA transaction (and per refused RCPT), written before the sink replies; see
scripts/smtp_sink.py for the steering table and the outcomes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import msgspec


class Transaction(msgspec.Struct, frozen=True, kw_only=True):
    """One line of transactions.jsonl."""

    n: int
    mail_from: str | None
    rcpt_tos: list[str]
    outcome: str  # accepted, rejected-NNN, dropped, slow, hang, incomplete, rcpt-NNN
    connection: int  # which accepted connection carried it (numbered from 1)
    data_started_at: float | None
    terminator_at: float | None  # None: the final dot never arrived (rcpt-NNN, incomplete)
    size: int | None = msgspec.field(name="bytes")
    stored: bool
    spool: str = ""

    @property
    def eml_path(self) -> Path:
        """Where the sink stored the exact bytes (only when stored is true)."""
        return Path(self.spool) / f"{self.n}.eml"

    def message(self) -> bytes:
        """The stored message bytes."""
        if not self.stored:
            raise ValueError(f"transaction {self.n} ({self.outcome}) stored no message")
        return self.eml_path.read_bytes()


def spool_dir(spool: Path | str | None = None) -> Path:
    """The sink's spool directory (default: $MAILTEST_SMTP_SPOOL)."""
    return Path(spool if spool is not None else os.environ["MAILTEST_SMTP_SPOOL"])


def transactions(spool: Path | str | None = None, *, rcpt: str | None = None) -> list[Transaction]:
    """All transactions so far, oldest first; with rcpt, only those naming that recipient."""
    directory = spool_dir(spool)
    log = directory / "transactions.jsonl"
    if not log.exists():
        return []
    found: list[Transaction] = []
    for line in log.read_bytes().splitlines():
        if not line.strip():
            continue
        t = msgspec.json.decode(line, type=Transaction)
        t = msgspec.structs.replace(t, spool=str(directory))
        if rcpt is None or any(r.lower() == rcpt.lower() for r in t.rcpt_tos):
            found.append(t)
    return found


async def wait_for_transactions(
    predicate: Callable[[Transaction], bool],
    count: int = 1,
    spool: Path | str | None = None,
    within: float = 5,
) -> list[Transaction]:
    """Poll until at least count transactions match predicate (or the timeout); return them."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        matching = [t for t in transactions(spool) if predicate(t)]
        if len(matching) >= count or asyncio.get_running_loop().time() > deadline:
            return matching
        await asyncio.sleep(0.02)
