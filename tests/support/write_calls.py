"""Helpers for the mailbox-write tests: an MCP client with the write gates on, and raw checks.

Calls go through a real in-process MCP client; the mailbox is the real Dovecot, reached either
directly or through tests/support/imap_proxy.py (which records every IMAP command, so "no
mailbox access" and "no MOVE issued" are observed on the wire, not assumed). Raw IMAP checks
use aioimaplib directly, independent of the product's IMAP code.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aioimaplib
from mcp import Client

from service.app import build_app
from service.config import load_config
from service.context import AppContext
from service.mcp_server import build_server
from service.principal import local_principal
from support.imap import (
    Append,
    append_messages,
    close_session,
    create_folder,
    ok,
    open_session,
    quote_mailbox,
)
from support.imap_proxy import ImapProxy
from support.services import Services

ALL_SCOPES = ("mail.read", "mail.write", "mail.send")
GATES_ON = {"MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_DELETE": "1"}
METADATA_URL = "https://mail.example.test/.well-known/oauth-protected-resource"
WRITE_TOOLS = frozenset({"mail_create", "mail_modify", "mail_delete_permanently"})


def message(subject: str = "write test", body: str = "hello") -> bytes:
    """A small RFC 5322 message with a unique Message-ID."""
    return (
        "From: Sender <sender@example.test>\r\n"
        "To: Alice <alice@example.test>\r\n"
        f"Subject: {subject}\r\n"
        "Date: Mon, 05 Jan 2026 09:00:00 +0000\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@example.test>\r\n"
        f"\r\n{body}\r\n"
    ).encode()


@dataclass(frozen=True)
class Seeded:
    """A fresh folder and the references of the messages appended to it."""

    folder: str
    uid_validity: int
    uids: list[int]

    def ref(self, index: int = 0) -> dict[str, Any]:
        """The reference object of the index-th seeded message."""
        return {"folder": self.folder, "uid_validity": self.uid_validity, "uid": self.uids[index]}


async def seed(
    services: Services, count: int = 1, *, flags: Sequence[str] = (), prefix: str = "writes"
) -> Seeded:
    """Create a uniquely named folder holding `count` fresh messages (with `flags`)."""
    imap = await open_session(services)
    try:
        folder = await create_folder(imap, prefix)
        appended = await append_messages(
            imap, folder, [Append(message(f"seed {i}"), flags=tuple(flags)) for i in range(count)]
        )
    finally:
        await close_session(imap)
    return Seeded(folder, appended.uidvalidity, appended.uids)


async def new_folder(services: Services, prefix: str = "writes-dest") -> tuple[str, int]:
    """Create an empty uniquely named folder; return its name and UIDVALIDITY."""
    imap = await open_session(services)
    try:
        folder = await create_folder(imap, prefix)
        return folder, await status_number(imap, folder, "UIDVALIDITY")
    finally:
        await close_session(imap)


async def status_number(imap: aioimaplib.IMAP4_SSL, folder: str, item: str) -> int:
    """One numeric STATUS item of a folder."""
    response = ok(await imap.status(quote_mailbox(folder), f"({item})"), f"STATUS {folder}")
    for line in response.lines:
        found = re.search(item.encode() + rb" (\d+)", bytes(line))
        if found:
            return int(found[1])
    raise AssertionError(f"STATUS {folder}: no {item}")


_FETCH_FLAGS = re.compile(rb"UID (\d+).*?FLAGS \(([^)]*)\)|FLAGS \(([^)]*)\).*?UID (\d+)")


async def flags_of(services: Services, folder: str, uid: int) -> set[str] | None:
    """The message's flags as Dovecot has them now (\\Recent left out), or None when absent."""
    imap = await open_session(services)
    try:
        ok(await imap.select(quote_mailbox(folder)), f"SELECT {folder}")
        response = ok(await imap.uid("fetch", str(uid), "(UID FLAGS)"), "UID FETCH")
        for line in response.lines:
            found = _FETCH_FLAGS.search(bytes(line))
            if found and int(found[1] or found[4]) == uid:
                text = (found[2] if found[2] is not None else found[3]).decode()
                return set(text.split()) - {"\\Recent"}
        return None
    finally:
        await close_session(imap)


async def store_flags(services: Services, folder: str, uid: int, change: str) -> None:
    """Change a message's flags from a second IMAP client, e.g. change="+FLAGS (\\Answered)"."""
    imap = await open_session(services)
    try:
        ok(await imap.select(quote_mailbox(folder)), f"SELECT {folder}")
        ok(await imap.uid("store", str(uid), *change.split(" ", 1)), "UID STORE")
    finally:
        await close_session(imap)


async def list_names(services: Services) -> set[str]:
    """Every folder name LIST reports, decoded from the quoted or atom form."""
    imap = await open_session(services)
    try:
        response = ok(await imap.list('""', "*"), "LIST")
    finally:
        await close_session(imap)
    names: set[str] = set()
    for line in response.lines:
        found = re.match(rb'(?:LIST )?\([^)]*\) (?:"[^"]*"|NIL) (?:"(.*)"|(\S+))$', bytes(line))
        if found:
            names.add(decode_mailbox((found[1] or found[2]).decode("ascii")))
    return names


def decode_mailbox(wire: str) -> str:
    """Undo quoted-string escapes, then decode an IMAP modified UTF-7 mailbox name."""
    wire = wire.replace('\\"', '"').replace("\\\\", "\\")
    return re.sub(
        r"&([^-]*)-",
        lambda m: (
            "&"
            if not m[1]
            else base64.b64decode(m[1].replace(",", "/") + "=" * (-len(m[1]) % 4)).decode(
                "utf-16-be"
            )
        ),
        wire,
    )


async def expunge_uid(services: Services, folder: str, uid: int) -> None:
    """Remove one message again (cleanup of shared folders such as Trash)."""
    imap = await open_session(services)
    try:
        ok(await imap.select(quote_mailbox(folder)), f"SELECT {folder}")
        ok(await imap.uid("store", str(uid), "+FLAGS", "(\\Deleted)"), "UID STORE")
        ok(await imap.uid("expunge", str(uid)), "UID EXPUNGE")
    finally:
        await close_session(imap)


class Tools:
    """One MCP client session against a server whose gates and scopes the test chose."""

    def __init__(self, client: Client, app: AppContext, proxy: ImapProxy | None) -> None:
        self.client = client
        self.app = app
        self.proxy = proxy
        self.last_meta: dict[str, Any] | None = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Call a tool; return (is_error, structured content) after checking the text copy."""
        result = await self.client.call_tool(tool, arguments)
        body = result.structured_content
        assert isinstance(body, dict)
        if not (result.is_error and body.get("error_code") == "insufficient_scope"):
            assert json.loads(result.content[0].text) == body  # exact integers in the text too
        self.last_meta = result.meta
        return bool(result.is_error), body

    async def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call and require success."""
        failed, body = await self.call(tool, arguments)
        assert not failed, body
        return body

    async def error(self, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        """Call and require the application error `code` with the write tools' retry hints."""
        failed, body = await self.call(tool, arguments)
        assert failed, body
        assert code == body["error_code"], body
        if tool in WRITE_TOOLS:
            assert body["retry_safe"] is False
            assert body["retry"]["transport_retry_safe"] is False
        return body

    async def untouched(self, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        """Call and require `code` with not one IMAP connection or command on the wire."""
        assert self.proxy is not None, "untouched() needs the proxy as witness"
        before = self.proxy.snapshot()
        body = await self.error(tool, arguments, code)
        assert before == self.proxy.snapshot(), f"the call reached the mailbox: {body}"
        return body

    async def read(self, ref: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """mail_query read of a reference."""
        return await self.call("mail_query", {"action": "read", "reference": dict(ref)})


@contextlib.asynccontextmanager
async def write_tools(
    services: Services,
    proxy: ImapProxy | None = None,
    *,
    scopes: Iterable[str] = ALL_SCOPES,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Tools]:
    """Yield Tools on a fresh server with writes and delete enabled unless `env` says otherwise."""
    port = proxy.port if proxy is not None else services.imap_port
    config = load_config(
        {**services.product_env, "IMAP_PORT": str(port), **GATES_ON, **(env or {})}
    )
    assert config.mail is not None, config.problems
    app = build_app(config, resource_metadata_url=METADATA_URL)
    principal = local_principal("writes-tests", tuple(scopes))
    server = build_server(app, lambda ctx: principal)
    try:
        async with Client(server) as client:
            yield Tools(client, app, proxy)
    finally:
        await app.aclose()
