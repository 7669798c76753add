"""The archiver every `serve` runs when ANGELOS_LEDGER_ARCHIVE_DIR is set, and the status of
the ledger's archive that /healthz and `capabilities` report either way."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Final

import redis.exceptions as rex
import structlog

from ledger.archive.archiver import ArchiveDamaged, Archiver, ArchiveRefused, ArchiveSettings
from ledger.archive.position import ArchivePosition
from ledger.archive.signed_note import SignerKey
from ledger.background import cancel_and_wait
from ledger.chain import key_of, mac_key_id
from ledger.ids import new_id
from ledger.store.answers import text
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError
from schemas.results import ArchiveStatus
from service.config import StoreConfig
from service.sending import Sending

log = structlog.get_logger("angelos.archive")

STATUS_EVERY_S: Final = 5.0
RETRY_S: Final = 5.0
BEHIND_CAP: Final = 10_000


async def read_status(position: ArchivePosition, state: str, reason: str) -> ArchiveStatus | None:
    """Read the archive's position and lag from the store (None: no archive exists)."""
    meta = position.keys.meta
    raw = await position.client.hmget(meta, ["archive_pos", "archive_n", "archive_cp"])
    pos, n, cp = (text(value) if value is not None else "" for value in raw)
    if not pos and state != "stopped":
        return None
    behind, oldest_ms = await position.behind(pos or "0-0", BEHIND_CAP)
    now = int(time.time() * 1000)
    size, _, at = cp.partition(" ")
    return ArchiveStatus(
        state=state,
        records=int(n) if n.isdigit() else 0,
        behind_events=behind,
        behind_more=behind >= BEHIND_CAP,
        behind_ms=max(now - oldest_ms, 0) if behind else 0,
        last_checkpoint_size=int(size) if size.isdigit() else 0,
        last_checkpoint_ms=int(at) if at.isdigit() else 0,
        checked_ms=now,
        reason=reason,
    )


def archive_settings(config: StoreConfig, root: str | None) -> ArchiveSettings | str:
    """The archiver's settings from the configuration, or why there are none."""
    where = root or config.archive_dir
    if where is None:
        return "no archive directory: set ANGELOS_LEDGER_ARCHIVE_DIR or pass --dir"
    if not os.path.isabs(where):
        return "the archive directory must be an absolute path"
    if config.audit_signing_key is None:
        return "ANGELOS_AUDIT_SIGNING_KEY is not set (create one with `angelos ledger keygen`)"
    signer = SignerKey.parse(config.audit_signing_key.reveal())
    key = key_of(config.hmac_key)
    return ArchiveSettings(
        root=Path(where),
        signer=signer,
        segment_bytes=config.archive_segment_bytes,
        checkpoint_interval_s=config.archive_checkpoint_s,
        recovery_grace_ms=config.recovery_grace_s * 1000,
        retention_ms=config.retention_s * 1000,
        mac_key_id="" if key is None else mac_key_id(key),
    )


class ArchiveTask:
    """Run the archiver (when configured) and refresh the archive's status every few seconds."""

    def __init__(self, store: LedgerStore, settings: ArchiveSettings | None) -> None:
        self.store = store
        self.settings = settings
        self.archiver: Archiver | None = None
        self.position = ArchivePosition(store.client, store.keys, new_id())
        self.state = "archiving" if settings is not None else "elsewhere"
        self.reason = ""
        self.status: ArchiveStatus | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the archiver and the status reader in the background."""
        if self.settings is not None:
            self._tasks.append(asyncio.create_task(self._archive(), name="ledger-archive"))
        self._tasks.append(asyncio.create_task(self._watch(), name="ledger-archive-status"))

    async def _archive(self) -> None:
        assert self.settings is not None
        while True:
            # A fresh archiver each time: its start brings the store and the directory into
            # line again (a position move whose reply was lost is found and kept).
            archiver = Archiver.for_client(self.store.client, self.store.keys, self.settings)
            self.archiver = archiver
            try:
                await archiver.start()
                self.state, self.reason = "archiving", ""
                await archiver.run(asyncio.Event())
            except (ArchiveRefused, ArchiveDamaged) as exc:
                await _closed(archiver)
                self._stopped(str(exc))
                return
            except MailError:
                await _closed(archiver)
                self.reason = f"the ledger store did not answer; retrying every {RETRY_S:g} s"
                log.warning("archive_store_unavailable")
                await asyncio.sleep(RETRY_S)
            except asyncio.CancelledError:
                await asyncio.shield(_closed(archiver, checkpoint=True))
                raise
            except Exception as exc:  # never take the server down; say so instead
                log.exception("archive_crashed")
                await _closed(archiver)
                self._stopped(f"the archiver failed: {type(exc).__name__}")
                return

    def _stopped(self, reason: str) -> None:
        self.state, self.reason = "stopped", reason
        log.error("archive_stopped", reason=reason)

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(MailError, OSError, rex.RedisError):
                self.status = await read_status(self.position, self.state, self.reason)
            await asyncio.sleep(STATUS_EVERY_S)

    async def stop(self) -> None:
        """Stop both loops; the archiver signs a last checkpoint and gives its lease up."""
        for task in reversed(self._tasks):
            await cancel_and_wait(task)
        self._tasks.clear()


async def _closed(archiver: Archiver, *, checkpoint: bool = False) -> None:
    """Close an archiver that stopped: its directory lock is freed (and a last checkpoint
    signed when it stops cleanly); what the store does not answer is left to the next start."""
    with contextlib.suppress(Exception):
        if checkpoint:
            await archiver.close()
        else:
            await asyncio.to_thread(archiver.writer.close)


def start_archive(store_config: StoreConfig | None, sending: Sending) -> ArchiveTask | None:
    """Start the archive task when the ledger store opened; None without a store."""
    if store_config is None or sending.store is None:
        return None
    settings = None
    if store_config.archive_dir is not None:
        found = archive_settings(store_config, None)
        if isinstance(found, str):  # the configuration check makes this unreachable
            log.error("archive_not_started", reason=found)
        else:
            settings = found
    task = ArchiveTask(sending.store, settings)
    task.start()
    return task
