"""Acceptance checks 45, 49 and 50 of sending (docs/acceptance/sending.md).

Check 45 loses the store between the SMTP terminator and the outcome append: a private Redis
(AOF, appendfsync always) is SIGKILLed the moment the sink has the final dot, while the sink holds
its 250 back, and restarted on the same data directory within the outcome persist window, after
the dispatcher answered, or after its process ended. The verdict reaches the ledger every time.
Checks 49 and 50 play an IMAP server that refuses the Sent APPEND, or advertises two `\\Sent`
folders, through the recording IMAP proxy; Dovecot's configuration is never touched.
Every test runs through an in-process MCP client in a ledger namespace of its own.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faults.harness import PrivateRedis

from ledger.store.ledger_store import LedgerStore
from schemas.ledger import decode_event
from schemas.send import PERSISTENCE_WARNING, SENT_COPY_WARNING
from support.imap import close_session, open_session
from support.imap_proxy import ImapProxy
from support.inprocess import mcp_client
from support.services import Services
from support.smtp_sink import transactions

pytestmark = pytest.mark.services
TEST_BUILD = {"ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test"}
SINK_DELAY_S = 2  # the sink stores the message, then holds its 250 back this long


def env(services: Services, **extra: str) -> dict[str, str]:
    """The product environment with sending on and a fresh ledger namespace."""
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": f"acm{uuid.uuid4().hex[:12]}",
        **extra,
    }


def fresh(local: str = "acm") -> str:
    """A recipient address no other test uses; the sink steers by the local part only."""
    return f"{local}@u{uuid.uuid4().hex[:10]}.example.test"


def store_of(app: Any) -> LedgerStore:
    store = app.sending.store
    assert store is not None
    return store  # type: ignore[no-any-return]


async def prepare(client: Any, rcpt: str) -> dict[str, Any]:
    message = {"to": [rcpt], "subject": "Plan", "text": "Hello"}
    result = await client.call_tool("mail_prepare", {"action": "new", "message": message})
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


async def confirm(
    client: Any, preview: dict[str, Any], append_sent: bool = False
) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(
        "mail_send_confirmed",
        {
            "prepared_id": preview["prepared_id"],
            "confirmed_digest": preview["digest"],
            "append_sent": append_sent,
        },
    )
    return bool(result.is_error), result.structured_content


async def status(client: Any, pid: str) -> dict[str, Any]:
    result = await client.call_tool("mail_query", {"action": "send_status", "prepared_id": pid})
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


async def ledger(app: Any, pid: str) -> list[Any]:
    """The decoded events of one send, oldest first, with the Redis time each was stored."""
    _, entries = await store_of(app).read(pid)
    return [(decode_event(entry.e), entry.srv_ms) for entry in entries]


async def terminator_seen(services: Services, rcpt: str, timeout_s: float = 20) -> None:
    """Wait until the sink has the final dot (it records the transaction before replying)."""
    deadline = time.monotonic() + timeout_s
    while not transactions(services.smtp_spool, rcpt=rcpt):
        assert time.monotonic() < deadline, "the sink never saw the terminator"
        await asyncio.sleep(0.02)


async def in_folder(services: Services, folder: str, message_id: str) -> int:
    """Count the messages of `folder` carrying this Message-ID."""
    imap = await open_session(services)
    try:
        await imap.select(folder)
        found = await imap.uid_search(f'HEADER Message-ID "{message_id}"')
    finally:
        await close_session(imap)
    return len(found.lines[0].split())


class TestStoreLostAfterTheTerminator:
    """Check 45: the dispatcher holds a definitive 250 it cannot record."""

    async def test_check_9_5_45_a_store_back_within_the_window_records_smtp_accepted(
        self, services: Services, tmp_path: Path
    ) -> None:
        rcpt = fresh(f"slow-{SINK_DELAY_S}")
        redis = PrivateRedis(tmp_path)
        await asyncio.to_thread(redis.start)
        # Lease refreshed every second: the dispatcher's lease is fresh when the store returns.
        settings = env(
            services,
            ANGELOS_REDIS_URL=redis.url,
            SEND_DISPATCHER_LEASE_MS="3000",
            SEND_DISPATCHER_LEASE_REFRESH_MS="1000",
        )
        try:
            async with mcp_client(settings) as (client, app):
                assert app.sending.usable, app.sending.reason
                preview = await prepare(client, rcpt)
                sending = asyncio.create_task(confirm(client, preview))
                await terminator_seen(services, rcpt)
                await asyncio.to_thread(redis.kill)
                # The 250 arrives after SINK_DELAY_S; the outcome append fails until the restart.
                await asyncio.sleep(SINK_DELAY_S + 1.5)
                assert not sending.done()
                back_ms = int(time.time() * 1000)
                await asyncio.to_thread(redis.start)
                error, answer = await asyncio.wait_for(sending, 30)
                recorded = await ledger(app, preview["prepared_id"])
                again_error, again = await confirm(client, preview)
                projected = await status(client, preview["prepared_id"])
        finally:
            await asyncio.to_thread(redis.stop)
        assert error is False, answer
        assert ("accepted", "acknowledgement") == (answer["status"], answer["stage"])
        assert PERSISTENCE_WARNING not in answer["warnings"]  # the retried append landed
        types = [event.type for event, _ in recorded]
        assert ["smtp_commit_point", "smtp_accepted"] == types[3:5], types
        (accepted_ms,) = [ms for event, ms in recorded if event.type == "smtp_accepted"]
        assert accepted_ms >= back_ms  # recorded by a retry after the store came back
        assert again_error is False and (False, "accepted") == (again["resent"], again["status"])
        assert "accepted" == projected["status"]
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    async def test_check_9_5_45_a_store_back_after_the_answer_still_gets_the_verdict(
        self, services: Services, tmp_path: Path
    ) -> None:
        rcpt = fresh(f"slow-{SINK_DELAY_S}")
        redis = PrivateRedis(tmp_path)
        await asyncio.to_thread(redis.start)
        settings = self.short_window(services, redis)
        try:
            async with mcp_client(settings) as (client, app):
                assert app.sending.usable, app.sending.reason
                preview, (error, answer) = await answered_without_a_store(
                    services, client, redis, rcpt
                )
                pid = preview["prepared_id"]
                await asyncio.to_thread(redis.start)
                seen = await statuses_until_closed(client, pid, within_s=20)
                recorded = await ledger(app, pid)
                replay_error, replay = await confirm(client, preview)
        finally:
            await asyncio.to_thread(redis.stop)
        assert error is False, answer
        assert "accepted" == answer["status"]
        assert PERSISTENCE_WARNING in answer["warnings"]
        assert "accepted" == seen[-1] and {"sending", "accepted"} >= set(seen), seen
        lifecycle = [event.type for event, _ in recorded if event.type != "duplicate_confirm"]
        assert ["smtp_commit_point", "smtp_accepted"] == lifecycle[3:]
        assert replay_error is False and (False, "accepted") == (replay["resent"], replay["status"])
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    async def test_check_9_5_45_the_verdict_outlives_its_process_in_the_journal(
        self, services: Services, tmp_path: Path
    ) -> None:
        rcpt = fresh(f"slow-{SINK_DELAY_S}")
        redis = PrivateRedis(tmp_path)
        await asyncio.to_thread(redis.start)
        settings = self.short_window(services, redis)
        try:
            async with mcp_client(settings) as (client, app):
                preview, (error, answer) = await answered_without_a_store(
                    services, client, redis, rcpt
                )
                pid = preview["prepared_id"]
            # The process has ended with the store still down; the next one starts after it.
            await asyncio.to_thread(redis.start)
            async with mcp_client(settings) as (client, app):
                seen = await statuses_until_closed(client, pid, within_s=20)
                recorded = await ledger(app, pid)
        finally:
            await asyncio.to_thread(redis.stop)
        assert error is False and PERSISTENCE_WARNING in answer["warnings"], answer
        assert "accepted" == seen[-1], seen
        lifecycle = [event for event, _ in recorded if event.type != "duplicate_confirm"]
        assert ["smtp_commit_point", "smtp_accepted"] == [e.type for e in lifecycle[3:]]
        first, _ = recorded[1]
        assert first.actor == lifecycle[-1].actor  # written for the dispatcher that saw it
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    @staticmethod
    def short_window(services: Services, redis: PrivateRedis) -> dict[str, str]:
        """Smallest persist window; the grace exceeds deadline + lease + 60 s (8 + 1 + 60)."""
        return env(
            services,
            ANGELOS_REDIS_URL=redis.url,
            SEND_OUTCOME_PERSIST_WINDOW_S="1",
            SMTP_DATA_TERMINATION_TIMEOUT_S="5",
            SEND_DISPATCH_DEADLINE_S="8",
            SEND_DISPATCHER_LEASE_MS="1000",
            SEND_DISPATCHER_LEASE_REFRESH_MS="300",
            SEND_RECOVERY_GRACE_S="70",
            SEND_RECOVERY_INTERVAL_S="1",
            **TEST_BUILD,
        )


async def answered_without_a_store(
    services: Services, client: Any, redis: PrivateRedis, rcpt: str
) -> tuple[dict[str, Any], tuple[bool, dict[str, Any]]]:
    """Confirm, kill the store the moment the sink has the final dot, and return the preview
    and the answer (the store stays down until the dispatcher has given up waiting)."""
    preview = await prepare(client, rcpt)
    sending = asyncio.create_task(confirm(client, preview))
    await terminator_seen(services, rcpt)
    await asyncio.to_thread(redis.kill)
    return preview, await asyncio.wait_for(sending, 30)


async def statuses_until_closed(client: Any, pid: str, within_s: float) -> list[str]:
    """Poll send_status until it leaves `sending` (or the time is up); every status seen."""
    seen: list[str] = []
    deadline = time.monotonic() + within_s
    while True:
        seen.append((await status(client, pid))["status"])
        if seen[-1] != "sending" or time.monotonic() > deadline:
            return seen
        await asyncio.sleep(0.2)


def sent_renamed(gone: str, hits: list[bytes]) -> Callable[[bytes], bytes]:
    """Advertise \\Sent on a folder that does not exist, and note every tagged NO."""
    pattern = re.compile(rb'^(\* LIST \(\\Sent\) "[^"]*" )"?Sent"?\r\n$')

    def rewrite(line: bytes) -> bytes:
        if re.match(rb"^[A-Za-z0-9.]+ NO ", line):
            hits.append(line)
        return pattern.sub(rb"\g<1>" + gone.encode() + b"\r\n", line)

    return rewrite


def archive_as_second_sent(line: bytes) -> bytes:
    return line.replace(b"(\\Archive)", b"(\\Sent)") if line.startswith(b"* LIST ") else line


class TestSentFilingFaults:
    async def test_check_9_6_49_an_append_answered_no_keeps_the_send_accepted_with_a_warning(
        self, services: Services
    ) -> None:
        # Dovecot itself answers NO: the advertised Sent folder does not exist, so nothing lands.
        gone = f"Sent-Gone-{uuid.uuid4().hex[:8]}"
        refusals: list[bytes] = []
        rcpt = fresh()
        async with ImapProxy(services, rewrite=sent_renamed(gone, refusals)) as proxy:
            settings = env(services, MAIL_ENABLE_WRITES="1", IMAP_PORT=str(proxy.port))
            async with mcp_client(settings) as (client, app):
                preview = await prepare(client, rcpt)
                error, answer = await confirm(client, preview, append_sent=True)
                recorded = await ledger(app, preview["prepared_id"])
                projected = await status(client, preview["prepared_id"])
                again_error, again = await confirm(client, preview, append_sent=True)
            appends = [line for line in proxy.lines if line.startswith("APPEND ")]
        assert error is False, answer
        assert "accepted" == answer["status"]
        assert SENT_COPY_WARNING in answer["warnings"]
        lifecycle = [event for event, _ in recorded if event.type != "duplicate_confirm"]
        started, failed = lifecycle[-2:]
        assert ("sent_filing_started", "sent_filing_failed") == (started.type, failed.type)
        assert ("rejected", "imap_rejected") == (failed.data.outcome, failed.data.reason)
        assert ("accepted", "failed") == (projected["status"], projected["sent_filing"])
        assert again_error is False and (False, "accepted") == (again["resent"], again["status"])
        assert 1 == len(appends) and gone in appends[0], appends  # one APPEND, never repeated
        assert [b"NO"] == [line.split()[1] for line in refusals]
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))
        assert 0 == await in_folder(services, "Sent", preview["message_id"])

    async def test_check_9_6_50_two_sent_folders_mean_no_filing_and_nothing_appended(
        self, services: Services
    ) -> None:
        rcpt = fresh()
        async with ImapProxy(services, rewrite=archive_as_second_sent) as proxy:
            settings = env(services, MAIL_ENABLE_WRITES="1", IMAP_PORT=str(proxy.port))
            async with mcp_client(settings) as (client, app):
                preview = await prepare(client, rcpt)
                error, answer = await confirm(client, preview, append_sent=True)
                recorded = await ledger(app, preview["prepared_id"])
                projected = await status(client, preview["prepared_id"])
            listed = proxy.count("LIST")
            appended = proxy.count("APPEND")
        assert error is False, answer
        assert "accepted" == answer["status"]
        assert SENT_COPY_WARNING in answer["warnings"]
        started, failed = recorded[-2][0], recorded[-1][0]
        assert ("sent_filing_started", "sent_filing_failed") == (started.type, failed.type)
        assert ("not_applied", "no_unique_sent_folder") == (failed.data.outcome, failed.data.reason)
        assert ("accepted", "failed") == (projected["status"], projected["sent_filing"])
        assert listed >= 1 and 0 == appended  # the folders were looked at; nothing was appended
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))
        for folder in ("Sent", "Archive"):
            assert 0 == await in_folder(services, folder, preview["message_id"])
