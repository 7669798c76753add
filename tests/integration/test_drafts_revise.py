"""revise_draft through an MCP client against the real Dovecot.

Acceptance checks (docs/acceptance): tools 74-78; sending 61-65 and 67.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
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
    new_folder,
    ok,
    read,
    save,
    seed,
    uids,
)
from support.inprocess import mcp_client

EVERYTHING = {**FULL, "in_reply_to": "<parent@example.test>", "references": ["<root@example.test>"]}


async def saved_draft(
    services: Any, message: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Save a draft in a fresh folder; return its reference and its structured read."""
    folder = await new_folder(services)
    async with mcp_client(env(services)) as (client, _):
        reference = await save(client, message or FULL, folder=folder)
        return reference, await read(client, reference)


def revise_args(draft: dict[str, Any], changes: Any, **extra: Any) -> dict[str, Any]:
    return {
        "action": "revise_draft",
        "reference": draft["reference"],
        "source_digest": draft["source_digest"],
        "changes": changes,
        **extra,
    }


async def revise(services: Any, draft: dict[str, Any], changes: Any, **extra: Any) -> Any:
    async with mcp_client(env(services)) as (client, _):
        return await call(client, "mail_create", revise_args(draft, changes, **extra))


async def read_revision(services: Any, result: dict[str, Any]) -> dict[str, Any]:
    async with mcp_client(env(services)) as (client, _):
        return await read(client, result["revision"]["destination"])


class TestRevision:
    async def test_a_revision_is_appended_beside_the_untouched_original(
        self, services: Any
    ) -> None:
        reference, draft = await saved_draft(services)
        before = await fetch(services, reference)
        changes = {"subject": "Revised", "text": "New text", "html": "<p>New</p>"}
        result = ok(await revise(services, draft, changes))
        revision = result["revision"]
        assert ("appended", reference) == (revision["status"], revision["source"])
        assert reference["folder"] == revision["destination"]["folder"]
        assert result["original_retained"] is True
        assert draft["source_digest"] == result["source_digest"]
        assert result["message_id"] != draft["message_id"]
        assert [*draft["warnings"]] == result["warnings"][:2] and 3 == len(result["warnings"])
        assert before == await fetch(services, reference)  # bytes and flags unchanged
        assert [reference["uid"], revision["destination"]["uid"]] == await uids(
            services, reference["folder"]
        )
        revised = await read_revision(services, result)
        assert result["message_id"] == revised["message_id"]
        assert "\\Draft" in revised["flags"]
        assert {**draft["message"], **changes} == revised["message"]

    async def test_a_subject_only_revision_keeps_bodies_bcc_and_files(self, services: Any) -> None:
        _, draft = await saved_draft(services, EVERYTHING)
        revised = await read_revision(
            services, ok(await revise(services, draft, {"subject": "New"}))
        )
        assert {**draft["message"], "subject": "New"} == revised["message"]

    async def test_a_revision_goes_to_the_folder_given(self, services: Any) -> None:
        _, draft = await saved_draft(services)
        elsewhere = await new_folder(services)
        result = ok(await revise(services, draft, {"subject": "Moved"}, folder=elsewhere))
        assert elsewhere == result["revision"]["destination"]["folder"]
        assert [result["revision"]["destination"]["uid"]] == await uids(services, elsewhere)

    async def test_a_stale_digest_is_a_draft_conflict_and_appends_nothing(
        self, services: Any
    ) -> None:
        reference, draft = await saved_draft(services)
        _, other = await saved_draft(services, {"text": "another draft"})
        for digest in ("f" * 64, other["source_digest"]):
            result = await revise(services, {**draft, "source_digest": digest}, {"subject": "x"})
            error = failed(result, "conflict")
            assert None is error["outcome"]
            assert {"transport_retry_safe": False, "action": "refresh_reference"} == error["retry"]
            assert "draft" in error["error"] and "Reread the complete draft" in error["recovery"]
        assert [reference["uid"]] == await uids(services, reference["folder"])

    @pytest.mark.parametrize(
        "changes",
        [{"text": "x"}, {"html": "<p>x</p>"}, {"html": ""}, {"text": ""}],
    )
    async def test_a_one_sided_body_edit_is_refused_before_any_append(
        self, services: Any, changes: dict[str, str]
    ) -> None:
        reference, draft = await saved_draft(services)
        error = failed(await revise(services, draft, changes), "invalid_arguments")
        assert "changes.text" in error["error"] and "changes.html" in error["error"]
        assert [reference["uid"]] == await uids(services, reference["folder"])

    async def test_new_text_with_cleared_html_drops_the_html_part(self, services: Any) -> None:
        _, draft = await saved_draft(services)
        result = ok(await revise(services, draft, {"text": "x", "html": ""}))
        revised = await read_revision(services, result)
        raw, _ = await fetch(services, result["revision"]["destination"])
        assert ("x", None) == (revised["message"]["text"], revised["message"].get("html"))
        assert b"text/html" not in raw

    async def test_an_emptied_plain_part_is_not_derived_again(self, services: Any) -> None:
        _, draft = await saved_draft(services)
        result = ok(await revise(services, draft, {"text": "", "html": "<p>only</p>"}))
        revised = (await read_revision(services, result))["message"]
        assert ("", "<p>only</p>") == (revised["text"], revised["html"])

    async def test_a_clearing_patch_keeps_both_bodies(self, services: Any) -> None:
        _, draft = await saved_draft(services, EVERYTHING)
        clear = {
            "to": [],
            "cc": [],
            "bcc": [],
            "attachments": [],
            "references": [],
            "in_reply_to": "",
        }
        revised = await read_revision(services, ok(await revise(services, draft, clear)))
        assert {"subject": "Plan", "text": "Hello\nthere", "html": "<p>Hello</p>"} == revised[
            "message"
        ]

    async def test_a_draft_from_another_sender_can_be_read_but_not_revised(
        self, services: Any
    ) -> None:
        [reference] = await seed(services, eml(["From: someone@else.test", *HEAD[1:]]))
        async with mcp_client(env(services)) as (client, _):
            draft = await read(client, reference)
            result = await call(client, "mail_create", revise_args(draft, {"subject": "x"}))
        assert "<someone@else.test>" == draft["from"]
        failed(result, "unsupported_operation")
        assert [reference["uid"]] == await uids(services, reference["folder"])


NOWHERE = {"folder": "NoSuch-Folder", "uid_validity": 1, "uid": 1}


class TestRefusedBeforeTheMailbox:
    """Malformed revisions fail validation; a reference to a missing folder proves no access."""

    @pytest.mark.parametrize(
        "changes",
        [{}, None, {"subject": None}, {"from": "x@example.com"}, {"raw": "From: x"}],
        ids=["empty", "null", "null-member", "from", "raw"],
    )
    async def test_malformed_changes(self, services: Any, changes: Any) -> None:
        draft = {"reference": NOWHERE, "source_digest": "a" * 64}
        failed(await revise(services, draft, changes), "invalid_arguments")

    @pytest.mark.parametrize("digest", ["A" * 64, "a" * 63, ""])
    async def test_a_malformed_digest(self, services: Any, digest: str) -> None:
        draft = {"reference": NOWHERE, "source_digest": digest}
        failed(await revise(services, draft, {"subject": "x"}), "invalid_arguments")


class ReplyCutter:
    """Relay IMAP (TLS) bytes; once a connection's client has sent more than `threshold`
    bytes, swallow every server reply and close that connection shortly after, so the
    server completes the command while the client never learns its outcome."""

    def __init__(self, port: int, threshold: int) -> None:
        self.target = port
        self.threshold = threshold
        self.cuts = 0
        self.port = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ReplyCutter]:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        cut = asyncio.Event()

        async def upstream() -> None:
            sent = 0
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    sent += len(data)
                    up_writer.write(data)
                    await up_writer.drain()
                    if sent > self.threshold and not cut.is_set():
                        cut.set()
                        self.cuts += 1
                        asyncio.get_running_loop().call_later(0.5, writer.transport.abort)

        async def downstream() -> None:
            with contextlib.suppress(ConnectionError):
                while data := await up_reader.read(65536):
                    if not cut.is_set():
                        writer.write(data)
                        await writer.drain()

        try:
            await asyncio.wait(
                [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())],
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            up_writer.transport.abort()
            writer.transport.abort()


class TestLostAppendReply:
    async def test_the_revision_outcome_is_unknown_and_the_original_retained(
        self, services: Any
    ) -> None:
        big = {**FILE, "data_base64": base64.b64encode(bytes(200_000)).decode()}
        reference, draft = await saved_draft(services, {**FULL, "attachments": [big]})
        cutter = ReplyCutter(services.imap_port, threshold=100_000)
        async with (
            cutter.running(),
            mcp_client(env(services, IMAP_PORT=str(cutter.port))) as (client, _),
        ):
            result = await call(client, "mail_create", revise_args(draft, {"subject": "Lost"}))
        error = failed(result, "outcome_unknown")
        assert 1 == cutter.cuts
        outcome = error["outcome"]
        assert ("unknown", reference) == (
            outcome["revision"]["status"],
            outcome["revision"]["source"],
        )
        assert outcome["original_retained"] is True
        assert draft["source_digest"] == outcome["source_digest"]
        assert "verify_outcome" == error["retry"]["action"]
        assert reference["uid"] in await uids(services, reference["folder"])
