"""Prepare, confirm once, status as a projection: against the real Redis and SMTP sink."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from schemas.ledger import decode_event
from service.principal import grant_binding
from support.imap import close_session, open_session
from support.inprocess import mcp_client
from support.smtp_sink import transactions

SEND_ON = {"MAIL_ENABLE_SEND": "1"}


def unique(local: str = "") -> str:
    """A recipient the sink has never seen (steering prefixes like rcpt-550 keep working)."""
    return f"{local}{'+' if local else ''}{uuid.uuid4().hex[:10]}@example.test".replace(
        "+", "" if not local else "+"
    )


def steered(local: str) -> str:
    return f"{local}@example.test"


def env(services: Any, **extra: str) -> dict[str, str]:
    namespace = f"t{uuid.uuid4().hex[:12]}"
    return {**services.product_env, **SEND_ON, "SEND_LEDGER_NAMESPACE": namespace, **extra}


async def prepare(client: Any, to: list[str], **message: Any) -> dict[str, Any]:
    result = await client.call_tool(
        "mail_prepare",
        {"action": "new", "message": {"to": to, "subject": "Plan", "text": "Hello", **message}},
    )
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


async def confirm(client: Any, preview: dict[str, Any], append_sent: bool = False) -> Any:
    return await client.call_tool(
        "mail_send_confirmed",
        {
            "prepared_id": preview["prepared_id"],
            "confirmed_digest": preview["digest"],
            "append_sent": append_sent,
        },
    )


async def status(client: Any, pid: str) -> dict[str, Any]:
    result = await client.call_tool("mail_query", {"action": "send_status", "prepared_id": pid})
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


class TestHappyPath:
    async def test_prepare_then_confirm_sends_exactly_once(self, services: Any) -> None:
        rcpt = f"pat-{uuid.uuid4().hex[:8]}@example.test"
        async with mcp_client(env(services)) as (client, _):
            preview = await prepare(client, [rcpt], bcc=["hidden@example.test"])
            assert "prepared" == preview["status"] and [] == preview["warnings"]
            assert "prepared" == (await status(client, preview["prepared_id"]))["status"]
            sent = await confirm(client, preview)
            assert sent.is_error is False, sent.structured_content
            assert {"status": "accepted", "stage": "acknowledgement"} == {
                k: sent.structured_content[k] for k in ("status", "stage")
            }
            assert sent.structured_content["delivery_verified"] is False
            after = await status(client, preview["prepared_id"])
            assert ("accepted", "acknowledgement") == (after["status"], after["stage"])
            again = await confirm(client, preview)
        seen = transactions(services.smtp_spool, rcpt=rcpt)
        assert 1 == len(seen) and "accepted" == seen[0].outcome
        assert {rcpt, "hidden@example.test"} == set(seen[0].rcpt_tos)
        assert b"hidden@example.test" not in seen[0].message()  # Bcc only in the envelope
        assert {"status": "accepted", "resent": False} == {
            k: again.structured_content[k] for k in ("status", "resent")
        }

    async def test_status_never_reveals_content_and_other_owners_see_unavailable(
        self, services: Any
    ) -> None:
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [f"x{uuid.uuid4().hex[:6]}@example.test"])
        async with mcp_client(settings, owner="someone-else") as (other, _):
            foreign = await status(other, preview["prepared_id"])
            refused = await confirm(other, preview)
        assert {
            "status": "unavailable",
            "delivery_verified": False,
            "warning": foreign["warning"],
        } == foreign
        assert refused.is_error and "operation_failed" == refused.structured_content["error_code"]
        async with mcp_client(settings) as (client, _):
            mine = await status(client, preview["prepared_id"])
        text = json.dumps(mine)
        assert "prepared" == mine["status"] and "Plan" not in text and "Hello" not in text


async def refusal_reasons(app: Any, pid: str, least: int) -> set[str]:
    """The reasons of the confirm_refused annotations (written in the background) on `pid`."""
    reasons: set[str] = set()
    for _ in range(50):
        _, entries = await app.sending.store.read(pid)
        reasons = {
            getattr(decode_event(e.e).data, "reason", "")
            for e in entries
            if e.t == "confirm_refused"
        }
        if len(reasons) >= least:
            break
        await asyncio.sleep(0.05)
    return reasons


class TestGrantBinding:
    """First-party mode: a preparation is confirmed only through the grant it was made under."""

    async def test_another_grant_of_the_same_owner_cannot_confirm(self, services: Any) -> None:
        rcpt = f"g{uuid.uuid4().hex[:8]}@example.test"
        grant_a, grant_b = grant_binding("grant-a"), grant_binding("grant-b")
        settings = env(services)
        async with mcp_client(settings, grant=grant_a) as (client_a, app):
            preview = await prepare(client_a, [rcpt])
            pid = preview["prepared_id"]
            async with mcp_client(settings, grant=grant_b) as (client_b, _):
                through_b = await confirm(client_b, preview)
                seen_by_b = await status(client_b, pid)
            async with mcp_client(settings) as (no_grant, _):
                without = await confirm(no_grant, preview)
            async with mcp_client(settings, owner="someone-else", grant=grant_a) as (other, _):
                foreign = await confirm(other, preview)
            refusals = await refusal_reasons(app, pid, 2)
            sent = await confirm(client_a, preview)
        for refused in (through_b, without):
            assert (
                refused.is_error and "operation_failed" == refused.structured_content["error_code"]
            )
            assert "another client's authorization" in refused.structured_content["error"]
        assert "another client's authorization" not in foreign.structured_content["error"]
        assert "prepared" == seen_by_b["status"]
        assert {"grant_mismatch", "owner_mismatch"} == set(refusals)
        assert sent.is_error is False and "accepted" == sent.structured_content["status"]
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    async def test_a_preparation_without_a_grant_needs_a_caller_without_one(
        self, services: Any
    ) -> None:
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [f"n{uuid.uuid4().hex[:8]}@example.test"])
        async with mcp_client(settings, grant=grant_binding("grant-a")) as (granted, _):
            refused = await confirm(granted, preview)
        assert "another client's authorization" in refused.structured_content["error"]


class TestFailureMatrix:
    @pytest.mark.parametrize(
        ("local", "status_", "stage"),
        [
            ("rcpt-550", "rejected", "envelope"),
            ("rcpt-450", "rejected", "envelope"),
            ("data-554", "rejected", "acknowledgement"),
            ("data-451", "rejected", "acknowledgement"),
            ("drop", "unknown", "acknowledgement"),
        ],
    )
    async def test_outcomes_are_recorded_and_never_retried(
        self, services: Any, local: str, status_: str, stage: str
    ) -> None:
        before = len(transactions(services.smtp_spool))
        async with mcp_client(env(services)) as (client, _):
            preview = await prepare(client, [steered(local)])
            first = await confirm(client, preview)
            assert first.is_error is False, first.structured_content
            outcome = first.structured_content
            assert (status_, stage) == (outcome["status"], outcome["stage"])
            projected = await status(client, preview["prepared_id"])
            replay = await confirm(client, preview)
        assert (status_, stage) == (projected["status"], projected["stage"])
        assert status_ == replay.structured_content["status"]
        assert replay.structured_content["resent"] is False
        seen = transactions(services.smtp_spool)[before:]
        # One SMTP transaction, ended at RCPT (no terminator) or after the final dot.
        assert 1 == len(seen)
        assert (seen[0].terminator_at is None) == local.startswith("rcpt-")

    async def test_digest_mismatch_is_refused_and_nothing_is_consumed(self, services: Any) -> None:
        rcpt = f"d{uuid.uuid4().hex[:8]}@example.test"
        async with mcp_client(env(services)) as (client, _):
            preview = await prepare(client, [rcpt])
            wrong = await confirm(client, {**preview, "digest": "0" * 64})
            assert "operation_failed" == wrong.structured_content["error_code"]
            assert "prepared" == (await status(client, preview["prepared_id"]))["status"]
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)

    async def test_hundred_concurrent_confirms_make_one_transaction(self, services: Any) -> None:
        rcpt = f"c{uuid.uuid4().hex[:8]}@example.test"
        async with mcp_client(env(services)) as (client, _):
            preview = await prepare(client, [rcpt])
            results = await asyncio.gather(*(confirm(client, preview) for _ in range(100)))
        statuses = [r.structured_content["status"] for r in results if not r.is_error]
        assert 100 == len(statuses)
        fresh = [r for r in results if "resent" not in r.structured_content]
        assert 1 == len(fresh) and "accepted" == fresh[0].structured_content["status"]
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    async def test_expired_preparation_cannot_be_sent(self, services: Any) -> None:
        rcpt = f"e{uuid.uuid4().hex[:8]}@example.test"
        test_build = {
            "ANGELOS_ALLOW_FAULT_INJECTION": "1",
            "ANGELOS_ENV": "test",
            "ANGELOS_TEST_PREPARE_TTL_MS": "1000",
        }
        async with mcp_client(env(services, **test_build)) as (client, _):
            preview = await prepare(client, [rcpt])
            await asyncio.sleep(1.2)
            late = await confirm(client, preview)
            projected = await status(client, preview["prepared_id"])
        assert "operation_failed" == late.structured_content["error_code"]
        assert "expired" == projected["status"]
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)


class TestSentFiling:
    async def test_append_sent_files_one_copy_in_sent(self, services: Any) -> None:
        rcpt = f"s{uuid.uuid4().hex[:8]}@example.test"
        settings = env(services, MAIL_ENABLE_WRITES="1")
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [rcpt])
            sent = await confirm(client, preview, append_sent=True)
            projected = await status(client, preview["prepared_id"])
        assert "accepted" == sent.structured_content["status"], sent.structured_content
        assert [] == sent.structured_content.get("warnings", [])
        assert "saved" == projected["sent_filing"]
        imap = await open_session(services)
        try:
            await imap.examine("Sent")
            imap.protocol.state = "SELECTED"  # aioimaplib sets it only after SELECT
            found = await imap.uid_search(
                f'HEADER Message-ID "{preview["message_id"]}"', charset=None
            )
        finally:
            await close_session(imap)
        assert 1 == len(found.lines[0].split())

    async def test_append_sent_without_writes_is_refused_before_the_claim(
        self, services: Any
    ) -> None:
        rcpt = f"w{uuid.uuid4().hex[:8]}@example.test"
        async with mcp_client(env(services)) as (client, _):
            preview = await prepare(client, [rcpt])
            refused = await confirm(client, preview, append_sent=True)
            projected = await status(client, preview["prepared_id"])
        assert "deployment_disabled" == refused.structured_content["error_code"]
        assert "prepared" == projected["status"]
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)
