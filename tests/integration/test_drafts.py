"""Saving and reading drafts through an MCP client against the real Dovecot.

Acceptance checks (docs/acceptance): tools 59-60 and 72-73; sending 58-60 and 68.
Every test works in its own folder or identifies its drafts by Message-ID: Drafts is shared.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from typing import Any

import pytest

from support.drafts_harness import (
    FILE,
    FULL,
    HEAD,
    call,
    eml,
    env,
    failed,
    fetch,
    ledger_keys,
    new_folder,
    read,
    save,
    seed,
    uids,
)
from support.imap import close_session, open_session
from support.imap import quote_mailbox as quoted
from support.inprocess import mcp_client
from support.smtp_sink import transactions


class TestSaveDraft:
    async def test_a_draft_lands_in_the_special_use_drafts_folder_with_a_private_bcc(
        self, services: Any
    ) -> None:
        hidden = f"hidden-{uuid.uuid4().hex[:8]}@example.test"
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            keys = await ledger_keys(services, settings)
            message = {"to": ["pat@example.test"], "bcc": [hidden], "subject": "S", "text": "T"}
            reference = await save(client, message)
            assert keys == await ledger_keys(services, settings)  # saving never touches the store
        assert "Drafts" == reference["folder"]
        raw, flags = await fetch(services, reference)
        assert raw.startswith(f"Bcc: <{hidden}>\r\n".encode())
        assert "\\Draft" in flags
        assert re.search(rb"\r\nFrom: <alice@example\.test>\r\n", raw)
        assert re.search(rb"\r\nMessage-ID: <[0-9a-f]{32}@example\.test>\r\n", raw)
        assert [] == transactions(services.smtp_spool, rcpt=hidden)  # saving never submits

    async def test_a_recipientless_empty_draft_is_saved(self, services: Any) -> None:
        async with mcp_client(env(services)) as (client, _):
            reference = await save(client, {"to": [], "subject": "", "text": ""})
            draft = await read(client, reference)
        assert {"subject": "", "text": ""} == draft["message"]

    async def test_an_explicit_folder_receives_the_draft(self, services: Any) -> None:
        folder = await new_folder(services)
        async with mcp_client(env(services)) as (client, _):
            reference = await save(client, {"text": "x"}, folder=folder)
        assert folder == reference["folder"]
        assert [reference["uid"]] == await uids(services, folder)

    async def test_a_null_member_is_refused_before_any_append(self, services: Any) -> None:
        async with mcp_client(env(services)) as (client, _):
            result = await call(client, "mail_create", {"action": "draft", "message": {"to": None}})
        body = failed(result, "invalid_arguments")
        assert (None, False) == (body["outcome"], body["retry_safe"])

    async def test_a_composition_error_is_invalid_arguments(self, services: Any) -> None:
        bad = {"action": "draft", "message": {"subject": "a\r\nBcc: x@example.test"}}
        async with mcp_client(env(services)) as (client, _):
            failed(await call(client, "mail_create", bad), "invalid_arguments")

    async def test_a_missing_folder_is_refused_by_the_server_with_an_unknown_outcome(
        self, services: Any
    ) -> None:
        arguments = {"action": "draft", "message": {"text": "x"}, "folder": "NoSuch-Drafts"}
        async with mcp_client(env(services)) as (client, _):
            body = failed(await call(client, "mail_create", arguments), "service_unavailable")
        assert {"status": "unknown"} == body["outcome"]
        assert (False, False) == (body["retry_safe"], body["retry"]["transport_retry_safe"])

    async def test_saving_needs_the_write_gate_and_scope(self, services: Any) -> None:
        arguments = {"action": "draft", "message": {"text": "x"}}
        async with mcp_client(env(services, MAIL_ENABLE_WRITES="0")) as (client, _):
            failed(await call(client, "mail_create", arguments), "deployment_disabled")
        async with mcp_client(env(services), ("mail.read",)) as (client, _):
            body = failed(await call(client, "mail_create", arguments), "insufficient_scope")
        assert "mail.write" == body["required_scope"]


class TestReadDraft:
    async def test_a_saved_draft_reads_back_as_it_was_composed(self, services: Any) -> None:
        async with mcp_client(env(services)) as (client, _):
            reference = await save(client, FULL)
            raw_before, flags_before = await fetch(services, reference)
            draft = await read(client, reference)
        raw_after, flags_after = await fetch(services, reference)
        message = draft["message"]
        assert ["<hidden@example.test>"] == message["bcc"]
        assert ('"Pat" <pat@example.test>', "<cc@example.test>") == (
            message["to"][0],
            message["cc"][0],
        )
        assert ("Hello\nthere", "<p>Hello</p>", "Plan") == (
            message["text"],
            message["html"],
            message["subject"],
        )
        assert [FILE] == message["attachments"]
        assert hashlib.sha256(raw_before).hexdigest() == draft["source_digest"]
        assert re.fullmatch("[0-9a-f]{64}", draft["source_digest"])
        assert reference == draft["reference"]
        assert "<alice@example.test>" == draft["from"]
        assert "\\Draft" in draft["flags"] and 2 == len(draft["warnings"])
        assert (raw_before, flags_before) == (raw_after, flags_after)  # PEEK: \Seen unchanged
        assert "\\Seen" not in flags_after

    async def test_a_draft_reads_with_writes_send_and_store_disabled(self, services: Any) -> None:
        attachment = base64.b64encode(b"\x00plan\xff").decode()
        body = (
            "--m\r\nContent-Type: multipart/alternative; boundary=a\r\n\r\n"
            "--a\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHi Pat\r\n"
            "--a\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hi Pat</p>\r\n--a--\r\n"
            "--m\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64"
            f'\r\nContent-Disposition: attachment; filename="plan.bin"\r\n\r\n{attachment}\r\n'
            "--m--"
        )
        headers = [
            *HEAD,
            "Bcc: Boss <boss@example.test>",
            "In-Reply-To: <parent@example.test>",
            "References: <root@example.test> <parent@example.test>",
            "Content-Type: multipart/mixed; boundary=m",
        ]
        raw = eml(headers, body)
        [reference] = await seed(services, raw)
        settings = {
            **services.product_env,
            "ANGELOS_REDIS_URL": "off",
            "MAIL_ENABLE_WRITES": "0",
            "MAIL_ENABLE_SEND": "0",
        }
        async with mcp_client(settings, ("mail.read",)) as (client, _):
            draft = await read(client, reference)
        assert {
            "to": ['"Pat" <pat@example.test>'],
            "bcc": ['"Boss" <boss@example.test>'],
            "subject": "Hand made",
            "text": "Hi Pat",
            "html": "<p>Hi Pat</p>",
            "attachments": [
                {
                    "filename": "plan.bin",
                    "content_type": "application/octet-stream",
                    "data_base64": attachment,
                }
            ],
            "in_reply_to": "<parent@example.test>",
            "references": ["<root@example.test>", "<parent@example.test>"],
        } == draft["message"]
        assert hashlib.sha256(raw).hexdigest() == draft["source_digest"]
        assert "<hand-made@example.test>" == draft["message_id"]
        assert "\\Seen" not in (await fetch(services, reference))[1]

    async def test_a_message_must_have_the_draft_flag_and_not_be_deleted(
        self, services: Any
    ) -> None:
        [plain] = await seed(services, eml(HEAD), flags=())
        [deleted] = await seed(services, eml(HEAD), flags=("\\Draft", "\\Deleted"))
        async with mcp_client(env(services)) as (client, _):
            for reference in (plain, deleted):
                arguments = {"action": "draft", "reference": reference}
                body = failed(await call(client, "mail_query", arguments), "invalid_arguments")
                assert body["retry_safe"] is True and body["outcome"] is None

    @pytest.mark.parametrize(
        ("extra", "body"),
        [
            (["X-Custom: 1"], "x"),
            (["Reply-To: r@example.test"], "x"),
            (["Content-Type: multipart/related; boundary=r"], "--r\r\n\r\nx\r\n--r--"),
            (["Content-Type: text/plain; charset=utf-8; format=flowed"], "x"),
            (
                ["Content-Type: multipart/mixed; boundary=m"],
                "--m\r\n\r\nbody\r\n--m\r\nContent-Type: image/png\r\nContent-ID: <i@x>\r\n"
                "Content-Disposition: inline\r\n\r\n\r\n--m--",
            ),
            (
                ["Content-Type: multipart/alternative; boundary=a"],
                "preamble\r\n--a\r\n\r\nx\r\n--a\r\nContent-Type: text/html\r\n\r\n<p>x</p>"
                "\r\n--a--",
            ),
            (
                ["Content-Type: multipart/alternative; boundary=a"],
                "--a\r\n\r\nx\r\n--a\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--a--\r\nbye",
            ),
            (
                ["Content-Type: multipart/alternative; boundary=a"],
                "--a\r\n\r\nx\r\n--a\r\nContent-Type: text/html\r\n\r\n\r\n--a--",
            ),
            (
                ['Content-Type: multipart/signed; boundary=s; protocol="application/pkcs7"'],
                "--s\r\n\r\nx\r\n--s\r\nContent-Type: application/pkcs7-signature\r\n\r\nAA==\r\n"
                "--s--",
            ),
        ],
        ids=[
            "x-custom",
            "reply-to",
            "related",
            "flowed",
            "inline-cid",
            "preamble",
            "epilogue",
            "empty-html",
            "signed",
        ],
    )
    async def test_a_draft_outside_the_subset_is_refused_whole(
        self, services: Any, extra: list[str], body: str
    ) -> None:
        [reference] = await seed(services, eml([*HEAD, *extra], body))
        async with mcp_client(env(services)) as (client, _):
            result = await call(client, "mail_query", {"action": "draft", "reference": reference})
        error = failed(result, "unsupported_operation")
        assert error["outcome"] is None and "message" not in error
        assert "supported structured MIME subset" in error["error"]

    async def test_the_corpus_drafts_are_outside_the_subset(self, services: Any) -> None:
        found = await uids(services, "Drafts", "HEADER X-Fixture 4")
        assert 2 <= len(found)
        validity = await fetch_validity(services, "Drafts")
        async with mcp_client(env(services)) as (client, _):
            for uid in found:
                reference = {"folder": "Drafts", "uid_validity": validity, "uid": uid}
                result = await call(
                    client, "mail_query", {"action": "draft", "reference": reference}
                )
                failed(result, "unsupported_operation")

    async def test_detail_is_not_an_argument_of_draft(self, services: Any) -> None:
        reference = {"folder": "NoSuch-Folder", "uid_validity": 1, "uid": 1}
        arguments = {"action": "draft", "reference": reference, "detail": "full"}
        async with mcp_client(env(services)) as (client, _):
            failed(await call(client, "mail_query", arguments), "invalid_arguments")

    async def test_a_result_over_1_mib_of_json_is_a_safety_limit(self, services: Any) -> None:
        big = {**FILE, "data_base64": base64.b64encode(b"\x01" * 800_000).decode()}
        async with mcp_client(env(services)) as (client, _):
            reference = await save(client, {"text": "x", "attachments": [big]})
            result = await call(client, "mail_query", {"action": "draft", "reference": reference})
        error = failed(result, "safety_limit")
        assert error["outcome"] is None and "message" not in error

    async def test_a_changed_uidvalidity_is_a_stale_reference(self, services: Any) -> None:
        [reference] = await seed(services, eml(HEAD))
        stale = {**reference, "uid_validity": reference["uid_validity"] + 1}
        async with mcp_client(env(services)) as (client, _):
            result = await call(client, "mail_query", {"action": "draft", "reference": stale})
        failed(result, "stale_reference")


async def fetch_validity(services: Any, folder: str) -> int:
    imap = await open_session(services)
    try:
        response = await imap.status(quoted(folder), "(UIDVALIDITY)")
    finally:
        await close_session(imap)
    match = re.search(rb"UIDVALIDITY (\d+)", b" ".join(bytes(line) for line in response.lines))
    assert match is not None
    return int(match[1])
