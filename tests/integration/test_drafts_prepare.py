"""mail_prepare draft and the whole drafts lifecycle against Dovecot, Redis and the SMTP sink.

Acceptance checks (docs/acceptance): tools 99; sending 64-66, and the end-to-end path:
save, read, revise, read the revision, prepare, confirm once, exactly the reviewed bytes sent.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from providers.mime.draft.draft import read_draft
from schemas.digest import approval_digest
from schemas.drafts import DRAFT_READ_WARNINGS, DRAFT_SNAPSHOT_NOTICE
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
    ok,
    read,
    save,
    seed,
    uids,
)
from support.inprocess import mcp_client
from support.smtp_sink import transactions


def prepare_args(draft: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "action": "draft",
        "reference": draft["reference"],
        "source_digest": draft["source_digest"],
        **extra,
    }


def revise_args(draft: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    return {**prepare_args(draft), "action": "revise_draft", "changes": changes}


async def confirm(client: Any, preview: dict[str, Any]) -> dict[str, Any]:
    arguments = {
        "prepared_id": preview["prepared_id"],
        "confirmed_digest": preview["digest"],
        "append_sent": False,
    }
    return ok(await call(client, "mail_send_confirmed", arguments))


class TestPrepareDraft:
    async def test_a_reviewed_draft_is_prepared_and_stays_in_place(self, services: Any) -> None:
        folder = await new_folder(services)
        message = {**FULL, "in_reply_to": "<p@example.test>", "references": ["<p@example.test>"]}
        async with mcp_client(env(services)) as (client, _):
            reference = await save(client, message, folder=folder)
            before = await fetch(services, reference)
            draft = await read(client, reference)
            preview = ok(await call(client, "mail_prepare", prepare_args(draft)))
            status = ok(
                await call(
                    client,
                    "mail_query",
                    {"action": "send_status", "prepared_id": preview["prepared_id"]},
                )
            )
        assert "prepared" == preview["status"] == status["status"]
        assert (["<hidden@example.test>"], "<p>Hello</p>", "Hello\nthere") == (
            preview["bcc"],
            preview["html"],
            preview["text"],
        )
        assert reference == preview["source_reference"]
        assert draft["source_digest"] == preview["source_digest"]
        assert preview["original_retained"] is True
        assert ("<p@example.test>", ["<p@example.test>"]) == (
            preview["in_reply_to"],
            preview["references"],
        )
        assert "alice@example.test" == preview["from"]
        assert f"<{preview['prepared_id']}@example.test>" == preview["message_id"]
        assert [*DRAFT_READ_WARNINGS, DRAFT_SNAPSHOT_NOTICE] == preview["warnings"]
        assert [("binary.dat", 3)] == [(a["filename"], a["bytes"]) for a in preview["attachments"]]
        assert before == await fetch(services, reference)
        assert [reference["uid"]] == await uids(services, folder)

    async def test_a_stale_digest_is_a_conflict_and_stores_nothing(self, services: Any) -> None:
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            draft = await read(client, await save(client, FULL, folder=await new_folder(services)))
            keys = await ledger_keys(services, settings)
            result = await call(
                client, "mail_prepare", {**prepare_args(draft), "source_digest": "e" * 64}
            )
            assert keys == await ledger_keys(services, settings)
        error = failed(result, "conflict")
        assert (None, "refresh_reference") == (error["outcome"], error["retry"]["action"])
        assert error["retry"]["transport_retry_safe"] is False

    async def test_a_recipientless_draft_cannot_be_prepared(self, services: Any) -> None:
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            draft = await read(client, await save(client, {"subject": "x", "text": "y"}))
            keys = await ledger_keys(services, settings)
            result = await call(client, "mail_prepare", prepare_args(draft))
            assert keys == await ledger_keys(services, settings)
        failed(result, "invalid_arguments")

    async def test_a_draft_from_another_sender_cannot_be_prepared(self, services: Any) -> None:
        [reference] = await seed(services, eml(["From: someone@else.test", *HEAD[1:]]))
        async with mcp_client(env(services)) as (client, _):
            draft = await read(client, reference)
            failed(await call(client, "mail_prepare", prepare_args(draft)), "unsupported_operation")

    async def test_an_html_only_draft_gains_a_derived_plain_part(self, services: Any) -> None:
        raw = eml([*HEAD, "Content-Type: text/html; charset=utf-8"], "<p>Hi <b>Pat</b></p>")
        [reference] = await seed(services, raw)
        async with mcp_client(env(services)) as (client, _):
            draft = await read(client, reference)
            preview = ok(await call(client, "mail_prepare", prepare_args(draft)))
        assert ("", "<p>Hi <b>Pat</b></p>") == (draft["message"]["text"], draft["message"]["html"])
        assert ("Hi Pat", "<p>Hi <b>Pat</b></p>") == (preview["text"], preview["html"])

    async def test_preparing_needs_the_send_gate(self, services: Any) -> None:
        arguments = prepare_args({"reference": HEAD_REF, "source_digest": "a" * 64})
        async with mcp_client(env(services, MAIL_ENABLE_SEND="0")) as (client, _):
            failed(await call(client, "mail_prepare", arguments), "deployment_disabled")
        async with mcp_client(env(services)) as (client, _):
            message = {**arguments, "message": {"text": "x"}}
            failed(await call(client, "mail_prepare", message), "invalid_arguments")


HEAD_REF = {"folder": "NoSuch-Folder", "uid_validity": 1, "uid": 1}


class TestLifecycle:
    async def test_saved_revised_prepared_and_sent_exactly_as_reviewed_once(
        self, services: Any
    ) -> None:
        rcpt = f"draft-{uuid.uuid4().hex[:8]}@example.test"
        hidden = f"bcc-{uuid.uuid4().hex[:8]}@example.test"
        second = {
            "filename": "notes.txt",
            "content_type": "text/plain; charset=utf-8",
            "data_base64": base64.b64encode("Grüße\n".encode()).decode(),
        }
        message = {
            "to": [f"Pat <{rcpt}>"],
            "bcc": [hidden],
            "subject": "Plan",
            "text": "First text",
            "html": "<p>First</p>",
            "attachments": [FILE, second],
        }
        folder = await new_folder(services)
        async with mcp_client(env(services)) as (client, _):
            original = await read(client, await save(client, message, folder=folder))
            changes = {"subject": "Plan v2", "text": "Second text", "html": "<p>Second</p>"}
            revision = ok(await call(client, "mail_create", revise_args(original, changes)))
            reviewed = await read(client, revision["revision"]["destination"])
            preview = ok(await call(client, "mail_prepare", prepare_args(reviewed)))
            later = {"subject": "Plan v3", "text": "Third", "html": "<p>Third</p>"}
            ok(await call(client, "mail_create", revise_args(reviewed, later)))
            sent = await confirm(client, preview)
            replay = await confirm(client, preview)

        assert {**message, **changes, "to": [f'"Pat" <{rcpt}>'], "bcc": [f"<{hidden}>"]} == (
            reviewed["message"]
        )
        assert ("accepted", False) == (sent["status"], replay["resent"])
        (seen,) = transactions(services.smtp_spool, rcpt=rcpt)
        data = seen.message()
        assert [rcpt, hidden] == seen.rcpt_tos
        assert approval_digest("alice@example.test", [rcpt, hidden], data) == preview["digest"]
        assert len(data) == preview["encoded_bytes"]
        assert hidden.encode() not in data  # Bcc only in the envelope
        delivered = read_draft(data)
        assert ("Plan v2", "Second text", "<p>Second</p>") == (
            delivered.subject,
            delivered.text,
            delivered.html,
        )
        assert [FILE["filename"], "notes.txt"] == [f.filename for f in delivered.attachments]
        assert preview["message_id"] == delivered.message_id
        assert 3 == len(await uids(services, folder))  # sending retired no draft
