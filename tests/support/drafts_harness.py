"""Shared harness of the drafts tests: calls, reads, raw seeding and ledger inspection."""

from __future__ import annotations

import re
import uuid
from typing import Any

import redis.asyncio as redis

from support.imap import Append, append_messages, close_session, create_folder, open_session
from support.imap import quote_mailbox as quoted

FILE = {"filename": "binary.dat", "content_type": "application/octet-stream", "data_base64": "AP+A"}
FULL = {
    "to": ["Pat <pat@example.test>"],
    "cc": ["cc@example.test"],
    "bcc": ["hidden@example.test"],
    "subject": "Plan",
    "text": "Hello\r\nthere",
    "html": "<p>Hello</p>",
    "attachments": [FILE],
}
FETCH_LINE = re.compile(rb"UID (\d+) FLAGS \(([^)]*)\)")


def env(services: Any, **extra: str) -> dict[str, str]:
    """Writes and sending on, with a ledger namespace of the test's own."""
    return {
        **services.product_env,
        "MAIL_ENABLE_WRITES": "1",
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": f"t{uuid.uuid4().hex[:12]}",
        **extra,
    }


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> Any:
    return await client.call_tool(tool, arguments)


def ok(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


def failed(result: Any, code: str) -> dict[str, Any]:
    assert result.is_error is True, result.structured_content
    body: dict[str, Any] = result.structured_content
    assert code == body["error_code"], body
    return body


async def save(client: Any, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Save a draft and return its destination reference."""
    result = ok(await call(client, "mail_create", {"action": "draft", "message": message, **extra}))
    assert "appended" == result["status"]
    reference: dict[str, Any] = result["destination"]
    return reference


async def read(client: Any, reference: dict[str, Any]) -> dict[str, Any]:
    return ok(await call(client, "mail_query", {"action": "draft", "reference": reference}))


async def fetch(services: Any, reference: dict[str, Any]) -> tuple[bytes, list[str]]:
    """The exact raw bytes and flags of a message, read with PEEK by a separate client."""
    imap = await open_session(services)
    try:
        await imap.examine(quoted(reference["folder"]))
        imap.protocol.state = "SELECTED"
        response = await imap.uid("fetch", str(reference["uid"]), "(UID FLAGS BODY.PEEK[])")
    finally:
        await close_session(imap)
    head = next(bytes(line) for line in response.lines if FETCH_LINE.search(bytes(line)))
    raw = next(bytes(line) for line in response.lines if isinstance(line, bytearray))
    match = FETCH_LINE.search(head)
    assert match is not None and int(match[1]) == reference["uid"]
    return raw, match[2].decode().split()


async def seed(services: Any, *messages: bytes, flags: tuple[str, ...] = ("\\Draft",)) -> list[Any]:
    """APPEND messages to a fresh folder; return their references."""
    imap = await open_session(services)
    try:
        folder = await create_folder(imap, "drafts")
        result = await append_messages(imap, folder, [Append(m, flags) for m in messages])
    finally:
        await close_session(imap)
    return [
        {"folder": folder, "uid_validity": result.uidvalidity, "uid": uid} for uid in result.uids
    ]


async def new_folder(services: Any) -> str:
    imap = await open_session(services)
    try:
        return await create_folder(imap, "drafts")
    finally:
        await close_session(imap)


async def uids(services: Any, folder: str, *criteria: str) -> list[int]:
    """UIDs of a folder, optionally narrowed by UID SEARCH criteria."""
    imap = await open_session(services)
    try:
        await imap.examine(quoted(folder))
        imap.protocol.state = "SELECTED"
        response = await imap.uid_search(" ".join(criteria) or "ALL", charset=None)
    finally:
        await close_session(imap)
    return [int(uid) for uid in bytes(response.lines[0]).split()]


async def ledger_keys(services: Any, settings: dict[str, str]) -> list[bytes]:
    """Every Redis key of the test's ledger namespace."""
    client = redis.from_url(services.redis_url)
    try:
        return sorted(
            [key async for key in client.scan_iter(f"*{settings['SEND_LEDGER_NAMESPACE']}*")]
        )
    finally:
        await client.aclose()


def eml(headers: list[str], body: str = "Hello") -> bytes:
    return ("\r\n".join(headers) + "\r\n\r\n" + body + "\r\n").encode("utf-8")


HEAD = [
    "From: Alice <alice@example.test>",
    "To: Pat <pat@example.test>",
    "Subject: Hand made",
    "Message-ID: <hand-made@example.test>",
    "MIME-Version: 1.0",
]
