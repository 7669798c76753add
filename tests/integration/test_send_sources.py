"""Replies and forwards through the ledger, and a dispatch that outlives its tool call."""

from __future__ import annotations

import asyncio
import email
import email.policy
import uuid
from pathlib import Path
from typing import Any

from support.imap import Append, append_messages, close_session, create_folder, open_session
from support.inprocess import mcp_client
from support.smtp_sink import transactions

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
TEST_BUILD = {"ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test"}


def env(services: Any, **extra: str) -> dict[str, str]:
    namespace = f"t{uuid.uuid4().hex[:12]}"
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": namespace,
        **extra,
    }


async def seed(services: Any, *names: str) -> list[dict[str, Any]]:
    imap = await open_session(services)
    try:
        folder = await create_folder(imap, "src")
        result = await append_messages(
            imap, folder, [Append((CORPUS / n).read_bytes()) for n in names]
        )
    finally:
        await close_session(imap)
    return [
        {"folder": folder, "uid_validity": result.uidvalidity, "uid": uid} for uid in result.uids
    ]


async def send(client: Any, preview: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(
        "mail_send_confirmed",
        {"prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
         "append_sent": False},
    )  # fmt: skip
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


class TestReplies:
    async def test_reply_goes_to_reply_to_and_threads_on_the_source(self, services: Any) -> None:
        (ref,) = await seed(services, "02-plain-cc-replyto.eml")
        async with mcp_client(env(services)) as (client, _):
            prepared = await client.call_tool(
                "mail_prepare",
                {"action": "reply", "reference": ref, "message": {"text": "Thanks!"}},
            )
            preview = prepared.structured_content
            assert prepared.is_error is False, preview
            outcome = await send(client, preview)
        assert 1 == len(preview["to"]) and preview["to"][0].endswith("<team-ops@example.test>")
        assert [] == preview["bcc"] and preview["subject"].startswith("Re: ")
        assert "<plain-cc-replyto.202601061403@example.test>" == preview["in_reply_to"]
        assert "accepted" == outcome["status"]
        (seen,) = transactions(services.smtp_spool, rcpt="team-ops@example.test")[-1:]
        sent = email.message_from_bytes(seen.message(), policy=email.policy.default)
        assert "<plain-cc-replyto.202601061403@example.test>" == sent["In-Reply-To"]
        assert sent["Message-ID"] == preview["message_id"]

    async def test_forward_needs_recipients_before_reading_the_source(self, services: Any) -> None:
        missing = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
        async with mcp_client(env(services)) as (client, _):
            result = await client.call_tool(
                "mail_prepare", {"action": "forward", "reference": missing, "message": {}}
            )
        assert "invalid_arguments" == result.structured_content["error_code"]

    async def test_forward_with_a_selected_attachment_sends_its_exact_bytes(
        self, services: Any
    ) -> None:
        (ref,) = await seed(services, "15-attachment-small-pdf.eml")
        rcpt = f"fw{uuid.uuid4().hex[:8]}@example.test"
        async with mcp_client(env(services)) as (client, _):
            prepared = await client.call_tool(
                "mail_prepare",
                {"action": "forward", "reference": ref, "message": {"to": [rcpt]},
                 "attachment_indexes": [1]},
            )  # fmt: skip
            preview = prepared.structured_content
            assert prepared.is_error is False, preview
            await send(client, preview)
        source = email.message_from_bytes(
            (CORPUS / "15-attachment-small-pdf.eml").read_bytes(), policy=email.policy.default
        )
        original = next(p for p in source.walk() if p.get_filename()).get_payload(decode=True)
        (seen,) = transactions(services.smtp_spool, rcpt=rcpt)
        sent = email.message_from_bytes(seen.message(), policy=email.policy.default)
        attached = [p.get_payload(decode=True) for p in sent.walk() if p.get_filename()]
        assert [original] == attached
        assert 1 == len(preview["included_source_attachments"])


class TestDeadline:
    async def test_past_the_tool_deadline_the_answer_is_sending_and_the_send_completes(
        self, services: Any
    ) -> None:
        settings = env(services, SEND_TOOL_DEADLINE_S="1", **TEST_BUILD)
        async with mcp_client(settings) as (client, _):
            prepared = await client.call_tool(
                "mail_prepare",
                {"action": "new", "message": {"to": ["slow-2.5@example.test"], "text": "x"}},
            )
            preview = prepared.structured_content
            started = asyncio.get_running_loop().time()
            answer = await send(client, preview)
            waited = asyncio.get_running_loop().time() - started
            assert "sending" == answer["status"] and answer["warnings"]
            assert waited < 2.0
            for _ in range(50):
                status = await client.call_tool(
                    "mail_query", {"action": "send_status", "prepared_id": preview["prepared_id"]}
                )
                if status.structured_content["status"] != "sending":
                    break
                await asyncio.sleep(0.1)
        assert "accepted" == status.structured_content["status"]

    async def test_a_cancelled_call_does_not_stop_the_dispatch(self, services: Any) -> None:
        rcpt = "slow-1.5@example.test"
        before = len(transactions(services.smtp_spool))
        async with mcp_client(env(services)) as (client, app):
            prepared = await client.call_tool(
                "mail_prepare", {"action": "new", "message": {"to": [rcpt], "text": "x"}}
            )
            preview = prepared.structured_content
            call = asyncio.create_task(send(client, preview))
            await asyncio.sleep(0.5)
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            await app.sending.dispatcher.drain(10)  # type: ignore[union-attr]
            status = await client.call_tool(
                "mail_query", {"action": "send_status", "prepared_id": preview["prepared_id"]}
            )
        assert "accepted" == status.structured_content["status"]
        assert 1 == len(transactions(services.smtp_spool)[before:])
