"""What every `angelos ledger` command shares: exit codes, the store, times, output helpers."""

from __future__ import annotations

import getpass
import re
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Final

import msgspec

from ledger.archive.signed_note import VerifierKey
from ledger.audit.checks import AuditRules
from ledger.audit.report import macs_state
from ledger.chain import DEFAULT_SKEW_MS, key_of
from ledger.store.ledger_store import LedgerStore
from schemas.errors import MailError
from schemas.ledger import LedgerUnavailable
from service.config import StoreConfig
from service.ledger_cli.rollback import attach_local_witness
from service.sending import open_store

OK, FINDINGS, USAGE, UNREACHABLE = 0, 1, 2, 3
UNVERIFIED = 4  # no findings, but MACs the ledger carries could not be checked
_RELATIVE: Final = re.compile(r"(\d+)([smhd])", re.ASCII)
_OPERATOR: Final = re.compile(r"[A-Za-z0-9._-]{1,64}", re.ASCII)
_UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


async def with_store(
    store_config: StoreConfig, body: Callable[[LedgerStore], Awaitable[int]]
) -> int:
    """Open the configured store, run `body` on it, close it; map store failures to exits."""
    try:
        store, embedded = await open_store(store_config)
    except MailError as exc:
        print(f"angelos ledger: {exc}", file=sys.stderr)
        return UNREACHABLE
    except Exception as exc:  # the embedded store failed to start, or similar
        print(
            f"angelos ledger: the ledger store did not open: {type(exc).__name__}", file=sys.stderr
        )
        return UNREACHABLE
    try:
        attach_local_witness(store, store_config.data_dir, await store.meta_field("store_id"))
        return await body(store)
    except LedgerUnavailable:
        print("angelos ledger: the ledger store did not answer", file=sys.stderr)
        return UNREACHABLE
    finally:
        await store.client.aclose()
        if embedded is not None:
            await embedded.stop()


def operator_actor(by: str | None) -> str | None:
    """The actor `operator:NAME` for `--by` (default: the login name), or None when unusable."""
    name = by if by is not None else _login()
    return f"operator:{name}" if _OPERATOR.fullmatch(name) else None


def _login() -> str:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64]
    return cleaned or "unknown"


async def unsealed_writer(store: LedgerStore) -> str | None:
    """Say why a person's event may not be written (the key that seals the ledger is missing or
    wrong: the entry would read as forged), or None when it may."""
    sealed = await store.meta_field("mac_key_id")
    macs, _ = macs_state(key_of(store.settings.hmac_key), sealed)
    if macs in ("not_checked", "wrong_key"):
        return (
            f"this ledger is sealed with HMAC key ID {sealed}; set its ANGELOS_LEDGER_HMAC_KEY "
            "to record anything"
        )
    return None


async def rules_for(store: LedgerStore, now_ms: int, skew_ms: int = DEFAULT_SKEW_MS) -> AuditRules:
    """The audit rules from the same settings the servers use (the retention from the meta)."""
    settings = store.settings
    key = key_of(settings.hmac_key)
    recorded = await store.meta_field("retention_ms")
    return AuditRules(
        key=key,
        skew_ms=skew_ms,
        grace_ms=settings.recovery_grace_ms,
        retention_ms=int(recorded) if recorded.isdigit() else settings.retention_ms,
        as_of_ms=now_ms,
        grace_source="environment",
        retention_source="ledger" if recorded.isdigit() else "environment",
    )


def parse_when(text: str, now_ms: int) -> int:
    """Parse ms since epoch, ISO 8601 (UTC unless it says otherwise), or an age like `2h`."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return now_ms - int(relative[1]) * _UNIT_MS[relative[2]]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SystemExit(f"angelos ledger: cannot read the time {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.now().astimezone().tzinfo).astimezone()
    return int(moment.timestamp() * 1000)


def public_key_of(text: str) -> VerifierKey:
    """Read a verifier key given as text or as the path of a file holding it."""
    candidate = Path(text)
    if "+" not in text or candidate.is_file():
        text = candidate.read_text(encoding="utf-8").strip()
    return VerifierKey.parse(text)


def print_json(value: object) -> None:
    """Write one JSON document and a newline to standard output."""
    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")
    sys.stdout.flush()


class Progress:
    """At most one progress line a second on stderr, only for runs longer than a second."""

    def __init__(self, what: str, *, quiet: bool) -> None:
        self.what = what
        self.quiet = quiet
        self.started = time.monotonic()
        self.last = self.started
        self.shown = False

    def __call__(self, streams: int, events: int) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last < 1.0:
            return
        self.last = now
        self.shown = True
        rate = events / (now - self.started) if events else 0
        extra = f", {events} events ({rate:,.0f}/s)" if events else ""
        print(f"{self.what}: {streams} done{extra}", file=sys.stderr, flush=True)

    def done(self) -> None:
        """Say how long the run took, when progress was shown at all."""
        if self.shown:
            print(
                f"{self.what}: finished in {time.monotonic() - self.started:.1f} s", file=sys.stderr
            )
