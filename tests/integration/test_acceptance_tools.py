"""Acceptance checks of the tools (docs/acceptance/tools.md) that no other test covered, one test
per check."""

from __future__ import annotations

import base64
import email
import email.policy
import hashlib
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aioimaplib
import pytest
from mcp import Client

from service.app import build_app
from service.config import load_config
from service.mcp_server import build_server
from service.principal import local_principal
from support.drafts_harness import ledger_keys
from support.imap import (
    Append,
    append_messages,
    close_session,
    create_folder,
    ok,
    open_session,
    quote_mailbox,
)
from support.inprocess import ALL_SCOPES, mcp_client
from support.query_harness import Mcp, folder, held_client, imap, mcp, proxy
from support.services import Services
from support.smtp_sink import transactions
from support.write_calls import METADATA_URL, expunge_uid, write_tools

__all__ = ["folder", "imap", "mcp", "proxy"]  # the query harness fixtures, used by name

PDF = b"%PDF-1.4\n" + bytes(range(256)) * 4 + b"\n%%EOF\n"
LATIN1 = b"caf\xe9 cr\xe8me\r\n"


def raw(headers: list[str], body: bytes | str) -> bytes:
    """A message from header lines and an exact body."""
    data = body.encode() if isinstance(body, str) else body
    return "\r\n".join(headers).encode() + b"\r\n\r\n" + data


def head(message_id: str, subject: str = "Acceptance", *extra: str) -> list[str]:
    return [
        "From: Fay <f@x.test>",
        "To: Alice <alice@example.test>",
        f"Subject: {subject}",
        "Date: Mon, 05 Jan 2026 09:00:00 +0000",
        f"Message-ID: <{message_id}>",
        "MIME-Version: 1.0",
        *extra,
    ]


def b64_lines(data: bytes) -> str:
    encoded = base64.b64encode(data).decode()
    return "\r\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))


def mixed_with_pdf(message_id: str) -> bytes:
    """The check-52 message: a text body and a.pdf."""
    body = (
        "--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSee the file.\r\n"
        "--b1\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n"
        'Content-Disposition: attachment; filename="a.pdf"\r\n\r\n'
        f"{b64_lines(PDF)}\r\n--b1--\r\n"
    )
    return raw(head(message_id, "PDF", 'Content-Type: multipart/mixed; boundary="b1"'), body)


def mixed_with_latin1(message_id: str) -> bytes:
    body = (
        "--b2\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSee the note.\r\n"
        "--b2\r\nContent-Type: text/plain; charset=iso-8859-1\r\n"
        "Content-Transfer-Encoding: base64\r\n"
        'Content-Disposition: attachment; filename="note.txt"\r\n\r\n'
        f"{b64_lines(LATIN1)}\r\n--b2--\r\n"
    )
    return raw(head(message_id, "Latin", 'Content-Type: multipart/mixed; boundary="b2"'), body)


def utf8_b64(text: str) -> tuple[list[str], str]:
    """Headers and a base64 body carrying text exactly (no added line break)."""
    return (
        ["Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: base64"],
        b64_lines(text.encode()),
    )


async def seed(services: Services, *messages: bytes, prefix: str = "accept") -> list[Any]:
    """APPEND to a fresh folder; references in order."""
    session = await open_session(services)
    try:
        name = await create_folder(session, prefix)
        result = await append_messages(session, name, [Append(m) for m in messages])
    finally:
        await close_session(session)
    return [{"folder": name, "uid_validity": result.uidvalidity, "uid": u} for u in result.uids]


async def modseq_of(session: aioimaplib.IMAP4_SSL, folder_name: str, uid: int) -> int:
    ok(await session.select(quote_mailbox(folder_name)), "SELECT")
    fetched = ok(await session.uid("fetch", str(uid), "(MODSEQ)"), "FETCH")
    ok(await session.close(), "CLOSE")
    found = re.search(rb"MODSEQ \((\d+)\)", b" ".join(map(bytes, fetched.lines)))
    assert found is not None
    return int(found[1])


async def preparations(services: Services, settings: dict[str, str]) -> list[bytes]:
    """The stream keys of stored preparations (startup writes meta and lease keys of its own)."""
    return [k for k in await ledger_keys(services, settings) if b":s:" in k]


def send_env(services: Services, **extra: str) -> dict[str, str]:
    return {
        **services.product_env,
        "MAIL_ENABLE_WRITES": "1",
        "MAIL_ENABLE_SEND": "1",
        "MAIL_ENABLE_DELETE": "1",
        "SEND_LEDGER_NAMESPACE": f"t{uuid.uuid4().hex[:12]}",
        **extra,
    }


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    body = result.structured_content
    assert isinstance(body, dict)
    return bool(result.is_error), body


async def good(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    failed, body = await call(client, tool, arguments)
    assert not failed, body
    return body


async def bad(client: Any, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
    failed, body = await call(client, tool, arguments)
    assert failed and code == body["error_code"], body
    return body


@pytest.fixture
async def sender(services: Services) -> AsyncIterator[tuple[Any, dict[str, str]]]:
    """A client with every gate and scope, held in a task of its own (see held_client)."""
    settings = send_env(services)
    app = build_app(load_config(settings))
    await app.start()
    server = build_server(app, lambda ctx: local_principal("tester", ALL_SCOPES))
    try:
        async with held_client(server) as client:
            yield client, settings
    finally:
        await app.aclose()


# read


async def test_check_44_summary_clips_ascii_text_at_exactly_4096_bytes(
    mcp: Mcp, services: Services
) -> None:
    text = ("a" * 59 + "\n") * 167  # 10,020 bytes of short lines
    extra, body = utf8_b64(text.replace("\n", "\r\n"))
    (ref,) = await seed(services, raw(head("c44@x.test", "Long", *extra), body))
    summary = await mcp.ok({"action": "read", "reference": ref})
    full = await mcp.ok({"action": "read", "reference": ref, "detail": "full"})
    assert 4096 == len(summary["text"].encode()) and summary["text_clipped"] is True
    assert summary["text_bytes"] == len(full["text"].encode())
    assert abs(summary["text_bytes"] - 10_000) < 100
    assert summary["full_text_hint"] and summary["truncated"] is False


async def test_check_45_summary_cuts_utf8_at_a_character_boundary(
    mcp: Mcp, services: Services
) -> None:
    extra, body = utf8_b64("é" * 3000)
    (ref,) = await seed(services, raw(head("c45@x.test", "Accents", *extra), body))
    summary = await mcp.ok({"action": "read", "reference": ref})
    assert 6000 == summary["text_bytes"]
    assert summary["text"] == "é" * 2048 and 4096 == len(summary["text"].encode())


async def test_check_49_a_uid_of_zero_or_no_reference_is_invalid_without_fetch(
    mcp: Mcp, services: Services
) -> None:
    zero = {"folder": "INBOX", "uid_validity": 1, "uid": 0}
    await mcp.error_without_access({"action": "read", "reference": zero}, "invalid_arguments")
    await mcp.error_without_access({"action": "read"}, "invalid_arguments")


async def test_check_51_html_only_text_drops_scripts_and_warns(
    mcp: Mcp, services: Services
) -> None:
    html = '<p>Hello <a href="https://example.test/x">link</a></p><script>zzq()</script>'
    message = raw(head("c51@x.test", "Html", "Content-Type: text/html; charset=utf-8"), html)
    (ref,) = await seed(services, message)
    body = await mcp.ok({"action": "read", "reference": ref})
    assert "Hello" in body["text"] and "zzq" not in body["text"]
    assert any("html" in w.lower() for w in body["warnings"])


async def test_check_52_full_read_lists_the_pdf_attachment(mcp: Mcp, services: Services) -> None:
    (ref,) = await seed(services, mixed_with_pdf("c52@x.test"))
    body = await mcp.ok({"action": "read", "reference": ref, "detail": "full"})
    assert [
        {"index": 1, "filename": "a.pdf", "content_type": "application/pdf", "size_bytes": len(PDF)}
    ] == body["attachments"]


# read_many


async def test_check_53_an_expunged_reference_is_an_error_item_in_place(
    mcp: Mcp, services: Services
) -> None:
    refs = await seed(services, *(raw(head(f"c53-{i}@x.test"), "hi\r\n") for i in range(3)))
    await expunge_uid(services, refs[1]["folder"], refs[1]["uid"])
    result = await mcp.client.call_tool("mail_query", {"action": "read_many", "references": refs})
    body = result.structured_content
    assert ["ok", "error", "ok"] == [i["status"] for i in body["items"]]
    assert refs == [i["reference"] for i in body["items"]]
    assert "not_found" == body["items"][1]["error"]["error_code"]
    assert all("subject" in body["items"][i]["message"] for i in (0, 2))
    assert "next_index" not in body and "stop_reason" not in body
    assert len(result.content[0].text.encode()) == body["response_bytes"]
    assert 65_536 == body["max_response_bytes"]


async def test_check_54_duplicate_references_are_invalid_without_fetch(mcp: Mcp) -> None:
    ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
    await mcp.error_without_access(
        {"action": "read_many", "references": [ref, ref]}, "invalid_arguments"
    )


async def test_check_55_reference_count_and_budget_bounds(mcp: Mcp, services: Services) -> None:
    ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
    many = [{**ref, "uid": i} for i in range(1, 12)]
    for references in ([], many):
        await mcp.error_without_access(
            {"action": "read_many", "references": references}, "invalid_arguments"
        )
    for budget in (4095, 131_073):
        await mcp.error_without_access(
            {"action": "read_many", "references": [ref], "max_response_bytes": budget},
            "invalid_arguments",
        )
    (real,) = await seed(services, raw(head("c55@x.test"), "hi\r\n"))
    body = await mcp.ok({"action": "read_many", "references": [real], "max_response_bytes": 0})
    assert 65_536 == body["max_response_bytes"]


async def test_check_56_ten_large_messages_resume_to_every_message_once(
    mcp: Mcp, services: Services
) -> None:
    messages = [
        raw(head(f"c56-{i}@x.test", f"Big {i}"), ("y" * 70 + "\r\n") * 285) for i in range(10)
    ]
    refs = await seed(services, *messages)
    first = await mcp.ok(
        {"action": "read_many", "references": refs, "detail": "full", "max_response_bytes": 16_000}
    )
    assert "response_limit" == first["stop_reason"] and first["response_bytes"] <= 16_000
    k = first["next_index"]
    assert "not_returned" == first["items"][k]["status"]
    assert all("not_read" == i["status"] for i in first["items"][k + 1 :])
    returned = [i["reference"]["uid"] for i in first["items"] if i["status"] == "ok"]
    rest = refs[k:]
    while rest:
        page = await mcp.ok(
            {
                "action": "read_many",
                "references": rest,
                "detail": "full",
                "max_response_bytes": 131_072,
            }
        )
        returned += [i["reference"]["uid"] for i in page["items"] if i["status"] == "ok"]
        rest = rest[page["next_index"] :] if "next_index" in page else []
    assert sorted(returned) == [r["uid"] for r in refs]


async def test_check_58_full_items_carry_the_exact_modseq(
    mcp: Mcp, services: Services, imap: aioimaplib.IMAP4_SSL
) -> None:
    (ref,) = await seed(services, raw(head("c58@x.test"), "hi\r\n"))
    modseq = await modseq_of(imap, ref["folder"], ref["uid"])
    body = await mcp.ok({"action": "read_many", "references": [ref], "detail": "full"})
    assert modseq == body["items"][0]["message"]["modseq"]


# attachment


async def test_check_61_attachments_come_back_byte_exact_with_the_read_metadata(
    mcp: Mcp, services: Services
) -> None:
    pdf_ref, latin_ref = await seed(
        services, mixed_with_pdf("c61a@x.test"), mixed_with_latin1("c61b@x.test")
    )
    listed = await mcp.ok({"action": "read", "reference": pdf_ref, "detail": "full"})
    got = await mcp.ok({"action": "attachment", "reference": pdf_ref, "index": 1})
    assert PDF == base64.b64decode(got["data_base64"])
    assert listed["attachments"][0] == got["attachment"]
    latin = await mcp.ok({"action": "attachment", "reference": latin_ref, "index": 1})
    assert LATIN1 == base64.b64decode(latin["data_base64"])


async def test_check_62_attachment_index_bounds(mcp: Mcp, services: Services) -> None:
    (ref,) = await seed(services, mixed_with_pdf("c62@x.test"))
    for index in (0, 101):
        await mcp.error_without_access(
            {"action": "attachment", "reference": ref, "index": index}, "invalid_arguments"
        )
    await mcp.error({"action": "attachment", "reference": ref, "index": 2}, "not_found")


# send_status

ZERO_ID = "0" * 32


async def test_check_63_send_status_needs_mail_send_with_a_step_up_challenge(
    services: Services,
) -> None:
    settings = send_env(services)
    async with write_tools(services, scopes=("mail.read",), env=settings) as tools:
        result = await tools.client.call_tool(
            "mail_query", {"action": "send_status", "prepared_id": ZERO_ID}
        )
    body = result.structured_content
    assert result.is_error and "insufficient_scope" == body["error_code"]
    assert "mail.send" == body["required_scope"]
    assert result.meta is not None
    assert 'scope="mail.read mail.send"' in result.meta["mcp/www_authenticate"][0]
    # Deliberately unlike the original's bare sentence: the text carries the same error object.
    assert json.loads(result.content[0].text) == body
    assert [] == await preparations(services, settings)


async def test_check_64_an_unknown_id_is_unavailable_with_three_keys(sender: Any) -> None:
    client, _ = sender
    body = await good(
        client, "mail_query", {"action": "send_status", "prepared_id": uuid.uuid4().hex}
    )
    assert {"status", "delivery_verified", "warning"} == set(body)
    assert "unavailable" == body["status"] and body["delivery_verified"] is False


async def test_check_65_a_malformed_id_is_refused_without_store_access(
    services: Services,
) -> None:
    settings = send_env(services)
    async with mcp_client(settings) as (client, _):
        await bad(
            client,
            "mail_query",
            {"action": "send_status", "prepared_id": "ABC"},
            "invalid_arguments",
        )
    assert [] == await preparations(services, settings)


async def test_check_66_status_reads_with_sending_off_and_hides_other_owners(
    services: Services,
) -> None:
    settings = send_env(services)
    async with mcp_client(settings) as (client, _):
        preview = await good(
            client,
            "mail_prepare",
            {"action": "new", "message": {"to": ["s66@example.test"], "subject": "S", "text": "T"}},
        )
    off = {**settings, "MAIL_ENABLE_SEND": "0"}
    query = {"action": "send_status", "prepared_id": preview["prepared_id"]}
    async with mcp_client(off) as (client, _):
        mine = await good(client, "mail_query", query)
    async with mcp_client(off, owner="somebody-else") as (other, _):
        foreign = await good(other, "mail_query", query)
    assert "prepared" == mine["status"] and preview["message_id"] == mine["message_id"]
    assert mine["expires_at"]
    assert {"status", "delivery_verified", "warning"} == set(foreign)
    assert "unavailable" == foreign["status"]


async def test_check_67_send_status_without_a_store_is_deployment_disabled(
    services: Services,
) -> None:
    async with mcp_client(send_env(services, ANGELOS_REDIS_URL="off")) as (client, _):
        await bad(
            client,
            "mail_query",
            {"action": "send_status", "prepared_id": ZERO_ID},
            "deployment_disabled",
        )


# mail_prepare


async def test_check_91_recipient_problems_are_invalid_and_store_nothing(
    services: Services,
) -> None:
    settings = send_env(services)
    fifty_one = [f"r{i}@example.test" for i in range(51)]
    async with mcp_client(settings) as (client, _):
        for message in (
            {"subject": "S", "text": "T"},
            {"to": fifty_one, "subject": "S", "text": "T"},
            {"to": None, "subject": "S", "text": "T"},
        ):
            await bad(
                client, "mail_prepare", {"action": "new", "message": message}, "invalid_arguments"
            )
    assert [] == await preparations(services, settings)


async def test_check_92_prepare_needs_the_send_gate_a_store_and_mail_send(
    services: Services,
) -> None:
    arguments = {"action": "new", "message": {"to": ["g92@example.test"], "text": "T"}}
    for extra in ({"MAIL_ENABLE_SEND": "0"}, {"ANGELOS_REDIS_URL": "off"}):
        async with mcp_client(send_env(services, **extra)) as (client, _):
            await bad(client, "mail_prepare", arguments, "deployment_disabled")
    async with mcp_client(send_env(services), ("mail.read", "mail.write")) as (client, _):
        await bad(client, "mail_prepare", arguments, "insufficient_scope")


async def test_check_93_reply_uses_reply_to_and_threads(sender: Any, services: Services) -> None:
    client, _ = sender
    source = raw(
        [
            "From: Fay <f@x.test>",
            "Reply-To: r@x.test",
            "To: owner@example.test",
            "Subject: Budget",
            "Date: Mon, 05 Jan 2026 09:00:00 +0000",
            "Message-ID: <P@X.test>",
            "References: <root@x.test>",
        ],
        "Line one\r\nLine two\r\n",
    )
    (ref,) = await seed(services, source)
    preview = await good(
        client, "mail_prepare", {"action": "reply", "reference": ref, "message": {"text": "Thanks"}}
    )
    assert 1 == len(preview["to"]) and preview["to"][0] in ("r@x.test", "<r@x.test>")
    assert [] == preview["cc"] and "<P@X.test>" == preview["in_reply_to"]
    assert ["<root@x.test>", "<P@X.test>"] == preview["references"]
    assert "Re: Budget" == preview["subject"]
    assert preview["text"].startswith("Thanks") and "> Line one" in preview["text"]
    assert preview["quote_original"] is True and "quoted" == preview["original_mode"]


async def test_check_94_reply_all_excludes_the_owner(sender: Any, services: Services) -> None:
    # The harness mailbox owner is MAIL_FROM of the test services, not owner@example.test.
    client, _ = sender
    source = raw(
        [
            "From: f@x.test",
            f"To: {services.mail_from}, a@x.test",
            "Cc: b@x.test",
            "Subject: All",
            "Date: Mon, 05 Jan 2026 09:00:00 +0000",
            "Message-ID: <all94@x.test>",
        ],
        "Hi all\r\n",
    )
    (ref,) = await seed(services, source)

    def bare(addresses: list[str]) -> set[str]:
        return {a.rsplit("<", 1)[-1].rstrip(">") for a in addresses}

    preview = await good(
        client,
        "mail_prepare",
        {"action": "reply_all", "reference": ref, "message": {"text": "Ok"}},
    )
    assert {"f@x.test"} == bare(preview["to"])
    assert {"a@x.test", "b@x.test"} == bare(preview["cc"])
    narrowed = await good(
        client,
        "mail_prepare",
        {"action": "reply_all", "reference": ref, "message": {"text": "Ok", "cc": []}},
    )
    assert [] == narrowed["cc"]


async def test_check_95_unquoted_reply_and_a_source_without_message_id(
    services: Services,
) -> None:
    settings = send_env(services)
    with_id, without_id = await seed(
        services,
        raw(head("c95@x.test", "Q"), "Original\r\n"),
        raw([h for h in head("none@x.test", "Q") if not h.startswith("Message-ID")], "Orig\r\n"),
    )
    async with mcp_client(settings) as (client, _):
        preview = await good(
            client,
            "mail_prepare",
            {
                "action": "reply",
                "reference": with_id,
                "quote_original": False,
                "message": {"text": "Only mine"},
            },
        )
        assert "Only mine" == preview["text"]
        before = await preparations(services, settings)
        failed, _ = await call(
            client,
            "mail_prepare",
            {"action": "reply", "reference": without_id, "message": {"text": "x"}},
        )
    assert failed
    assert before == await preparations(services, settings)


async def test_check_96_forward_argument_errors_before_any_fetch(
    services: Services, proxy: Any
) -> None:
    settings = send_env(services, IMAP_PORT=str(proxy.port))
    ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
    async with mcp_client(settings) as (client, _):
        before = proxy.snapshot()
        for arguments in (
            {"action": "forward", "reference": ref, "message": {"subject": "x"}},
            {
                "action": "forward",
                "reference": ref,
                "original_mode": "eml",
                "quote_original": False,
                "message": {"to": ["t@example.test"]},
            },
            {
                "action": "forward",
                "reference": ref,
                "attachment_indexes": [1, 1],
                "message": {"to": ["t@example.test"]},
            },
        ):
            await bad(client, "mail_prepare", arguments, "invalid_arguments")
        assert before == proxy.snapshot()
    assert [] == await preparations(services, settings)


async def test_check_97_an_eml_forward_drops_only_the_bcc_line(
    sender: Any, services: Services
) -> None:
    client, _ = sender
    rcpt = f"fw{uuid.uuid4().hex[:8]}@example.test"
    source = raw([*head("c97@x.test", "Orig"), "Bcc: secret@x.test", "X-Keep: kept"], "Body\r\n")
    (ref,) = await seed(services, source)
    preview = await good(
        client,
        "mail_prepare",
        {
            "action": "forward",
            "reference": ref,
            "original_mode": "eml",
            "message": {"to": [rcpt], "text": "FYI"},
        },
    )
    assert "forwarded-message.eml" in [a["filename"] for a in preview["attachments"]]
    assert "" == preview["in_reply_to"] and preview["subject"].startswith("Fwd:")
    await good(
        client,
        "mail_send_confirmed",
        {"prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
         "append_sent": False},
    )  # fmt: skip
    (seen,) = transactions(services.smtp_spool, rcpt=rcpt)
    sent = email.message_from_bytes(seen.message(), policy=email.policy.default)
    part = next(p for p in sent.walk() if p.get_filename() == "forwarded-message.eml")
    payload = part.get_payload(decode=True)
    if payload is None:  # message/rfc822 keeps the inner message as a sub-part
        payload = part.get_payload()[0].as_bytes()
    assert b"secret@x.test" not in payload and b"Bcc:" not in payload
    assert b"X-Keep: kept" in payload and b"Message-ID: <c97@x.test>" in payload


# mail_send_confirmed


async def test_check_105_append_sent_files_the_sent_bytes_with_seen(
    sender: Any, services: Services
) -> None:
    client, _ = sender
    rcpt = f"s105{uuid.uuid4().hex[:8]}@example.test"
    preview = await good(
        client,
        "mail_prepare",
        {"action": "new", "message": {"to": [rcpt], "subject": "Filed", "text": "Copy"}},
    )
    sent = await good(
        client,
        "mail_send_confirmed",
        {"prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
         "append_sent": True},
    )  # fmt: skip
    assert "accepted" == sent["status"]
    (seen,) = transactions(services.smtp_spool, rcpt=rcpt)
    session = await open_session(services)
    try:
        ok(await session.select("Sent"), "SELECT")
        found = ok(
            await session.uid_search(f'HEADER Message-ID "{preview["message_id"]}"', charset=None),
            "SEARCH",
        )
        (uid,) = bytes(found.lines[0]).split()
        fetched = ok(await session.uid("fetch", uid.decode(), "(FLAGS BODY.PEEK[])"), "FETCH")
        ok(await session.close(), "CLOSE")
    finally:
        await close_session(session)
    stored = next(bytes(line) for line in fetched.lines if isinstance(line, bytearray))
    assert b"\\Seen" in b" ".join(map(bytes, fetched.lines))
    assert hashlib.sha256(seen.message()).hexdigest() == hashlib.sha256(stored).hexdigest()


async def test_check_104_a_sent_copy_without_mail_write_is_refused_before_the_claim(
    services: Services,
) -> None:
    settings = send_env(services)
    rcpt = f"s104{uuid.uuid4().hex[:8]}@example.test"
    async with mcp_client(settings) as (client, _):
        preview = await good(
            client, "mail_prepare", {"action": "new", "message": {"to": [rcpt], "text": "T"}}
        )
    app = build_app(load_config(settings), resource_metadata_url=METADATA_URL)
    await app.start()
    principal = local_principal("tester", ("mail.read", "mail.send"))
    try:
        async with Client(build_server(app, lambda ctx: principal)) as client:
            result = await client.call_tool(
                "mail_send_confirmed",
                {"prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
                 "append_sent": True},
            )  # fmt: skip
    finally:
        await app.aclose()
    async with mcp_client(settings) as (client, _):
        status = await good(
            client, "mail_query", {"action": "send_status", "prepared_id": preview["prepared_id"]}
        )
    body = result.structured_content
    assert result.is_error and "insufficient_scope" == body["error_code"]
    assert ["mail.read", "mail.write", "mail.send"] == body["required_scopes"]
    assert result.meta is not None
    assert 'scope="mail.read mail.write mail.send"' in result.meta["mcp/www_authenticate"][0]
    assert "prepared" == status["status"]
    assert [] == transactions(services.smtp_spool, rcpt=rcpt)
