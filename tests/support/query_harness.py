"""Shared harness of the query tests: an MCP client on a fresh app, raw-IMAP seeding, flags."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import aioimaplib
import pytest
from mcp import Client

from service.app import build_app
from service.config import load_config
from service.mcp_server import build_server
from service.principal import local_principal
from support.counting_proxy import CountingProxy
from support.imap import (
    Append,
    append_messages,
    close_session,
    create_folder,
    ok,
    open_session,
    quote_mailbox,
)
from support.services import Services

PRINCIPAL = local_principal("search-tests", ("mail.read",))


def mail(
    subject: str = "hello",
    *,
    message_id: str | None = None,
    headers: Sequence[str] = (),
    body: str = "hello",
) -> bytes:
    """A small RFC 5322 message; `headers` are added verbatim."""
    lines = [
        "From: Sender <sender@example.test>",
        "To: Alice <alice@example.test>",
        f"Subject: {subject}",
        "Date: Mon, 05 Jan 2026 09:00:00 +0000",
    ]
    if message_id is not None:
        lines.append(f"Message-ID: {message_id}")
    lines += headers
    return ("\r\n".join(lines) + "\r\n\r\n" + body + "\r\n").encode()


class Mcp:
    """One in-process MCP client session against a fresh application."""

    def __init__(self, client: Client, proxy: CountingProxy) -> None:
        self.client = client
        self.proxy = proxy

    async def call(self, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        result = await self.client.call_tool("mail_query", arguments)
        body = result.structured_content
        assert isinstance(body, dict)
        assert json.loads(result.content[0].text) == body  # exact integers in the text too
        return bool(result.is_error), body

    async def ok(self, arguments: dict[str, Any]) -> dict[str, Any]:
        failed, body = await self.call(arguments)
        assert not failed, body
        return body

    async def error(self, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        failed, body = await self.call(arguments)
        assert failed, body
        assert code == body["error_code"], body
        return body

    async def error_without_access(self, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        before = self.proxy.snapshot()
        body = await self.error(arguments, code)
        assert before == self.proxy.snapshot(), "the call reached the mailbox"
        return body

    async def search(self, folder: str, **filters: Any) -> dict[str, Any]:
        return await self.ok({"action": "search", "search": {"folder": folder, **filters}})

    async def uids(self, folder: str, **filters: Any) -> list[int]:
        return [m["uid"] for m in (await self.search(folder, **filters))["messages"]]

    async def all_pages(self, arguments: dict[str, Any]) -> list[dict[str, Any]]:
        pages = [await self.ok(arguments)]
        while "next_cursor" in pages[-1]:
            search = {**arguments.get("search", {}), "cursor": pages[-1]["next_cursor"]}
            pages.append(await self.ok({**arguments, "search": search}))
        return pages


@pytest.fixture(scope="module")
def proxy(services: Services) -> Iterator[CountingProxy]:
    with CountingProxy("127.0.0.1", services.imap_port) as counting:
        yield counting


@pytest.fixture
async def mcp(services: Services, proxy: CountingProxy) -> AsyncIterator[Mcp]:
    config = load_config({**services.product_env, "IMAP_PORT": str(proxy.port)})
    app = build_app(config)
    server = build_server(app, lambda ctx: PRINCIPAL)
    async with held_client(server) as client:
        yield Mcp(client, proxy)
    await app.aclose()


@contextlib.asynccontextmanager
async def held_client(server: Any) -> AsyncIterator[Client]:
    """Keep an MCP client open in a task of its own.

    anyio wants a client entered and exited by the same task, and pytest-asyncio sets up and
    tears down a fixture in different tasks; calls from the test task are fine.
    """
    opened: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    finished = asyncio.Event()

    async def hold() -> None:
        async with Client(server) as client:
            opened.set_result(client)
            await finished.wait()

    task = asyncio.create_task(hold())
    done, _ = await asyncio.wait({task, opened}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # raises why the client did not open
    try:
        yield opened.result()
    finally:
        finished.set()
        await task


@pytest.fixture
async def imap(services: Services) -> AsyncIterator[aioimaplib.IMAP4_SSL]:
    session = await open_session(services)
    yield session
    await close_session(session)


@pytest.fixture
async def folder(imap: aioimaplib.IMAP4_SSL) -> AsyncIterator[str]:
    name = await create_folder(imap, "search")
    yield name
    await imap.delete(quote_mailbox(name))


async def seed(imap: aioimaplib.IMAP4_SSL, folder: str, *items: Append | bytes) -> list[int]:
    return (await append_messages(imap, folder, items)).uids


async def live_flags(imap: aioimaplib.IMAP4_SSL, folder: str) -> dict[int, set[str]]:
    """UID → flags read over raw IMAP (FETCH FLAGS changes no flag; \\Recent is left out)."""
    ok(await imap.select(quote_mailbox(folder)), "SELECT")
    response = ok(await imap.uid("fetch", "1:*", "(UID FLAGS)"), "FETCH FLAGS")
    ok(await imap.close(), "CLOSE")
    found: dict[int, set[str]] = {}
    for line in response.lines:
        match = re.search(rb"UID (\d+) FLAGS \(([^)]*)\)|FLAGS \(([^)]*)\) UID (\d+)", bytes(line))
        if match:
            uid = int(match[1] or match[4])
            words = (match[2] if match[1] else match[3]).decode().split()
            found[uid] = {w for w in words if w != "\\Recent"}
    return found
