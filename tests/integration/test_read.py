"""read, read_many and attachment through the MCP boundary against the real Dovecot."""

from __future__ import annotations

import asyncio
import base64
import email
import email.policy
import json
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from support.imap import Append, append_messages, close_session, create_folder, open_session
from support.inprocess import mcp_client

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
FILES = {
    "plain": "01-plain-welcome.eml",
    "replyto": "02-plain-cc-replyto.eml",
    "html": "10-html-only-newsletter.eml",
    "pdf": "15-attachment-small-pdf.eml",
    "big_attachment": "17-attachment-over-2mib.eml",
    "over_5mib": "18-attachment-over-5mib-total.eml",
    "koi8": "27-charset-koi8-r-base64.eml",
}


def long_text_message(size: int, subject: str = "Long") -> bytes:
    msg = EmailMessage()
    msg["From"] = "Ann <ann@example.test>"
    msg["To"] = "alice@example.test"
    msg["Subject"] = subject
    msg["Date"] = "Fri, 02 Jan 2026 03:04:05 +0000"
    msg["Message-ID"] = f"<long-{size}@example.test>"
    line = "é" + "x" * 68 + "\n"  # a 2-byte character on every line tests the cut
    msg.set_content(line * (size // len(line.encode()) + 1))
    return msg.as_bytes(policy=email.policy.SMTP)


@pytest.fixture(scope="module")
def seeded(services: Any) -> dict[str, dict[str, Any]]:
    return asyncio.run(seed(services))


async def seed(services: Any) -> dict[str, dict[str, Any]]:
    imap = await open_session(services)
    try:
        folder = await create_folder(imap, "read")
        names = list(FILES)
        appends = [Append((CORPUS / FILES[n]).read_bytes()) for n in names]
        names += ["long", "huge1", "huge2", "huge3", "huge4", "huge5"]
        appends.append(Append(long_text_message(10_000)))
        appends += [Append(long_text_message(250_000, f"Huge {i}")) for i in range(5)]
        result = await append_messages(imap, folder, appends)
    finally:
        await close_session(imap)
    return {
        name: {"folder": folder, "uid_validity": result.uidvalidity, "uid": uid}
        for name, uid in zip(names, result.uids, strict=True)
    }


async def call(services: Any, arguments: dict[str, Any]) -> Any:
    async with mcp_client(services.product_env, ("mail.read",)) as (client, _):
        result = await client.call_tool("mail_query", arguments)
    assert json.loads(result.content[0].text) == result.structured_content
    return result


class TestRead:
    async def test_summary_read_of_a_plain_message(self, services: Any, seeded: Any) -> None:
        result = await call(services, {"action": "read", "reference": seeded["plain"]})
        body = result.structured_content
        assert result.is_error is False
        assert seeded["plain"] == body["reference"]
        assert body["subject"] and body["text"] and body["truncated"] is False
        assert body["from"][0]["address"].endswith("example.test")
        assert "text_clipped" not in body and "attachments" not in body

    async def test_full_read_has_safe_headers_including_reply_to(
        self, services: Any, seeded: Any
    ) -> None:
        result = await call(
            services, {"action": "read", "reference": seeded["replyto"], "detail": "full"}
        )
        body = result.structured_content
        assert "Reply-To" in body["headers"] and "Message-Id" in body["headers"]
        assert "Bcc" not in body["headers"]
        assert isinstance(body["attachments"], list) and body["truncated"] is False

    async def test_summary_clips_text_at_4096_bytes_and_full_does_not(
        self, services: Any, seeded: Any
    ) -> None:
        summary = await call(services, {"action": "read", "reference": seeded["long"]})
        full = await call(
            services, {"action": "read", "reference": seeded["long"], "detail": "full"}
        )
        s, f = summary.structured_content, full.structured_content
        assert s["text_clipped"] is True and len(s["text"].encode()) <= 4096
        assert len(f["text"].encode()) == s["text_bytes"] > 4096
        assert f["text"].startswith(s["text"]) and "full" in s["full_text_hint"]
        assert s["truncated"] is False and "text_clipped" not in f

    async def test_html_only_mail_becomes_readable_text(self, services: Any, seeded: Any) -> None:
        body = (
            await call(services, {"action": "read", "reference": seeded["html"], "detail": "full"})
        ).structured_content
        assert "<script" not in body["text"] and "<p>" not in body["text"]
        assert "https://" in body["text"]
        assert body["warnings"]

    async def test_koi8_r_body_is_decoded(self, services: Any, seeded: Any) -> None:
        body = (
            await call(services, {"action": "read", "reference": seeded["koi8"], "detail": "full"})
        ).structured_content
        assert any("\u0400" <= ch <= "\u04ff" for ch in body["text"])

    async def test_a_message_over_5_mib_reads_as_truncated(
        self, services: Any, seeded: Any
    ) -> None:
        body = (
            await call(services, {"action": "read", "reference": seeded["over_5mib"]})
        ).structured_content
        assert body["truncated"] is True and body["warnings"]

    async def test_reading_leaves_unread_mail_unread(self, services: Any, seeded: Any) -> None:
        await call(services, {"action": "read", "reference": seeded["plain"], "detail": "full"})
        body = (
            await call(services, {"action": "read", "reference": seeded["plain"]})
        ).structured_content
        assert "\\Seen" not in body["flags"]

    async def test_stale_reference_says_search_again(self, services: Any, seeded: Any) -> None:
        stale = {**seeded["plain"], "uid_validity": seeded["plain"]["uid_validity"] + 1}
        result = await call(services, {"action": "read", "reference": stale})
        body = result.structured_content
        assert result.is_error and "stale_reference" == body["error_code"]
        assert "refresh_reference" == body["retry"]["action"] and body["retry_safe"] is True

    async def test_missing_message_is_not_found(self, services: Any, seeded: Any) -> None:
        missing = {**seeded["plain"], "uid": 99_999}
        body = (await call(services, {"action": "read", "reference": missing})).structured_content
        assert "not_found" == body["error_code"]


class TestReadMany:
    async def test_items_keep_input_order_and_response_bytes_is_exact(
        self, services: Any, seeded: Any
    ) -> None:
        refs = [seeded["plain"], seeded["replyto"], seeded["pdf"]]
        result = await call(services, {"action": "read_many", "references": refs})
        body = result.structured_content
        assert refs == [item["reference"] for item in body["items"]]
        assert ["ok", "ok", "ok"] == [item["status"] for item in body["items"]]
        assert len(result.content[0].text.encode()) == body["response_bytes"]
        assert 65_536 == body["max_response_bytes"] and "next_index" not in body

    async def test_budget_stop_then_resume_from_next_index(
        self, services: Any, seeded: Any
    ) -> None:
        refs = [seeded["long"], seeded["huge1"], seeded["huge2"], seeded["plain"]]
        first = (
            await call(
                services,
                {
                    "action": "read_many",
                    "references": refs,
                    "detail": "full",
                    "max_response_bytes": 16_384,
                },
            )
        ).structured_content
        assert "response_limit" == first["stop_reason"] and first["response_bytes"] <= 16_384
        index = first["next_index"]
        assert "not_returned" == first["items"][index]["status"]
        assert all(i["status"] == "not_read" for i in first["items"][index + 1 :])
        rest = (
            await call(
                services,
                {"action": "read_many", "references": refs[index:], "max_response_bytes": 131_072},
            )
        ).structured_content
        assert all(i["status"] == "ok" for i in rest["items"])

    async def test_a_failed_item_is_reported_and_the_batch_continues(
        self, services: Any, seeded: Any
    ) -> None:
        stale = {**seeded["replyto"], "uid_validity": seeded["replyto"]["uid_validity"] + 1}
        body = (
            await call(
                services,
                {"action": "read_many", "references": [seeded["plain"], stale, seeded["pdf"]]},
            )
        ).structured_content
        assert ["ok", "error", "ok"] == [i["status"] for i in body["items"]]
        error = body["items"][1]["error"]
        assert "stale_reference" == error["error_code"] and error["outcome"] is None

    async def test_admitted_full_messages_stop_at_one_mib(self, services: Any, seeded: Any) -> None:
        refs = [seeded[f"huge{i}"] for i in range(1, 6)]
        body = (
            await call(
                services, {"action": "read_many", "references": refs, "max_response_bytes": 131_072}
            )
        ).structured_content
        assert (
            "message_limit" == body["stop_reason"] and body["admitted_message_bytes"] <= 1_048_576
        )
        assert "not_returned" == body["items"][body["next_index"]]["status"]

    async def test_references_that_alone_exceed_the_budget_are_invalid(self, services: Any) -> None:
        refs = [{"folder": "F" * 1000 + str(i), "uid_validity": 1, "uid": 1} for i in range(10)]
        body = (
            await call(
                services, {"action": "read_many", "references": refs, "max_response_bytes": 4096}
            )
        ).structured_content
        assert "invalid_arguments" == body["error_code"]


class TestAttachment:
    async def test_bytes_round_trip_exactly(self, services: Any, seeded: Any) -> None:
        source = email.message_from_bytes(
            (CORPUS / FILES["pdf"]).read_bytes(), policy=email.policy.default
        )
        expected = next(p for p in source.walk() if p.get_filename()).get_payload(decode=True)
        body = (
            await call(services, {"action": "attachment", "reference": seeded["pdf"], "index": 1})
        ).structured_content
        assert expected == base64.b64decode(body["data_base64"])
        assert 1 == body["attachment"]["index"] and body["attachment"]["size_bytes"] == len(
            expected
        )

    @pytest.mark.parametrize(
        ("name", "index", "code"),
        [
            ("big_attachment", 1, "safety_limit"),
            ("over_5mib", 1, "safety_limit"),
            ("plain", 1, "not_found"),
        ],
    )
    async def test_limits_and_missing_indexes(
        self, services: Any, seeded: Any, name: str, index: int, code: str
    ) -> None:
        body = (
            await call(
                services, {"action": "attachment", "reference": seeded[name], "index": index}
            )
        ).structured_content
        assert code == body["error_code"]
