"""Tests of the Graph contract double itself, through plain aiohttp requests (no product code).

Each endpoint answers as the contract says and really changes the Dovecot mailbox behind it
(checked over IMAP, logged in as the Graph user); ids stay put across a move; paging covers every
message once; tokens, required headers, faults and the concurrency limit behave as documented;
and msgraph-sdk's own models and request builders accept one exchange of every endpoint. Tests
that change the mailbox do so in folders of their own.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import aioimaplib
import pytest
import pytest_asyncio
from aiohttp.abc import AbstractResolver, ResolveResult

from support.graph_double import (
    ApplyThenStatus,
    Delay,
    Drop,
    GraphDouble,
    SdkUnavailable,
    Status,
    check_against_sdk,
    contract,
    graph_double,
)
from support.imap import close_session, ok
from support.mailbox_names import quote_mailbox
from support.services import Services

pytestmark = pytest.mark.services

TOKEN = "graph-double-test-token"
BASE = "https://graph.microsoft.com/v1.0"
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json",
    "Prefer": 'IdType="ImmutableId"',
}
GRAPH_ID = re.compile(r"[A-Za-z0-9_=-]{1,1024}")
WELCOME = "<plain-welcome.202601050912@example.test>"
ENCODED = "<encoded-subject-utf8-b.202603020915@example.org>"
ATTACHED = "<attachment-csv-nonascii-name.202602101505@example.org>"


class _ToDouble(AbstractResolver):
    """graph.microsoft.com:443 resolves to the double's loopback port; TLS still checks the name."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        assert "graph.microsoft.com" == host, host
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=self.port,
                family=socket.AF_INET,
                proto=0,
                flags=0,
            )
        ]

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class Answer:
    """A response, read whole."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


class Graph:
    """A plain HTTPS client of the double, with the headers the contract requires by default."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def call(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        mime: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        omit: Sequence[str] = (),
        seconds: float = 10,
    ) -> Answer:
        """One request (a path is taken under /v1.0; a nextLink as it is)."""
        sent = {k: v for k, v in {**HEADERS, **(headers or {})}.items() if k not in omit}
        data: bytes | None = None
        if body is not None:
            data, sent["Content-Type"] = json.dumps(body).encode(), "application/json"
        if mime is not None:
            data, sent["Content-Type"] = base64.b64encode(mime), "text/plain"
        async with self.session.request(
            method,
            url if url.startswith("https://") else BASE + url,
            data=data,
            headers=sent,
            timeout=aiohttp.ClientTimeout(total=seconds),
        ) as response:
            return Answer(response.status, response.headers, await response.read())

    async def get(self, url: str, **kw: Any) -> Any:
        """GET that must answer 200; its JSON."""
        answer = await self.call("GET", url, **kw)
        assert 200 == answer.status, answer.body
        return answer.json


@pytest_asyncio.fixture
async def double(services: Services) -> AsyncIterator[GraphDouble]:
    async with graph_double(services) as d:
        d.accept_token(TOKEN)
        yield d


@pytest_asyncio.fixture
async def graph(double: GraphDouble, services: Services) -> AsyncIterator[Graph]:
    connector = aiohttp.TCPConnector(resolver=_ToDouble(double.port), ssl=services.ssl_context())
    async with aiohttp.ClientSession(connector=connector) as session:
        yield Graph(session)


@pytest_asyncio.fixture
async def imap(services: Services) -> AsyncIterator[aioimaplib.IMAP4_SSL]:
    """An independent IMAP session on the Graph user's mailbox."""
    client = aioimaplib.IMAP4_SSL(
        host=services.imap_host,
        port=services.imap_port,
        timeout=10,
        ssl_context=services.ssl_context(),
    )
    await client.wait_hello_from_server()
    ok(await client.login(services.graph_user, services.graph_password), "LOGIN")
    try:
        yield client
    finally:
        await close_session(client)


async def imap_flags(imap: aioimaplib.IMAP4_SSL, folder: str) -> dict[str, set[str]]:
    """Message-ID → flags of every message in `folder`, read over IMAP."""
    ok(await imap.select(quote_mailbox(folder)), f"SELECT {folder}")
    fetched = await imap.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
    found: dict[str, set[str]] = {}
    flags: set[str] = set()
    for line in fetched.lines:
        m = re.search(rb"FLAGS \(([^)]*)\)", bytes(line))
        if m:
            flags = set(m[1].decode().split()) - {"\\Recent"}
        m = re.search(rb"(?i)message-id:\s*(<[^>]+>)", bytes(line))
        if m:
            found[m[1].decode()] = flags
    return found


def new_mime(subject: str = "Graph double test") -> tuple[bytes, str]:
    """A small message with a Message-ID of its own."""
    message_id = f"<gd-{uuid.uuid4().hex}@example.test>"
    mime = (
        "From: Dana Example <dana@example.test>\r\n"
        "To: Bob Okafor <bob@example.test>\r\n"
        f"Subject: {subject}\r\n"
        f"Message-ID: {message_id}\r\n"
        "Date: Tue, 03 Feb 2026 10:00:00 +0100\r\n"
        "MIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n\r\n"
        "Hello from the Graph double test.\r\n"
    ).encode()
    return mime, message_id


async def new_folder(graph: Graph, parent: str | None = None) -> dict[str, Any]:
    """A fresh, uniquely named folder (top-level, or under `parent`)."""
    url = "/me/mailFolders" if parent is None else f"/me/mailFolders/{parent}/childFolders"
    answer = await graph.call("POST", url, body={"displayName": f"gd-{uuid.uuid4().hex[:10]}"})
    assert 201 == answer.status, answer.body
    return dict(answer.json)


async def new_message(graph: Graph, folder_id: str) -> tuple[dict[str, Any], str]:
    """A message made from MIME in `folder_id` (E8), and its Message-ID."""
    mime, message_id = new_mime()
    answer = await graph.call("POST", f"/me/mailFolders/{folder_id}/messages", mime=mime)
    assert 201 == answer.status, answer.body
    return dict(answer.json), message_id


async def by_message_id(graph: Graph, folder: str, message_id: str) -> dict[str, Any]:
    """The one message of `folder` with this internetMessageId."""
    page = await graph.get(
        f"/me/mailFolders/{folder}/messages?$filter=internetMessageId eq '{message_id}'"
    )
    [found] = page["value"]
    return dict(found)


async def test_me_answers_the_identity_and_only_what_was_selected(
    double: GraphDouble, graph: Graph
) -> None:
    me = await graph.get("/me?$select=id,mail,userPrincipalName")
    assert {"@odata.context", "id", "mail", "userPrincipalName"} == set(me)
    assert (double.account_id, double.mail, double.mail) == (
        me["id"],
        me["mail"],
        me["userPrincipalName"],
    )
    assert GRAPH_ID.fullmatch(me["id"])
    double.identity(id="someone-else", upn="other@example.test")
    me = await graph.get("/me?$select=id,mail,userPrincipalName")
    assert ("someone-else", double.mail, "other@example.test") == (
        me["id"],
        me["mail"],
        me["userPrincipalName"],
    )


async def test_top_level_folders_are_the_mailboxes_under_the_root(
    graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    page = await graph.get("/me/mailFolders?$top=100")
    names = {f["displayName"]: f for f in page["value"]}
    for name in ("Inbox", "Drafts", "Sent Items", "Deleted Items", "Junk Email", "Archive"):
        assert name in names
    assert "Projets" in names and "@odata.nextLink" not in page
    root = (await graph.get("/me/mailFolders/msgfolderroot"))["id"]
    assert {root} == {f["parentFolderId"] for f in page["value"]}
    assert all(GRAPH_ID.fullmatch(f["id"]) and f["isHidden"] is False for f in page["value"])
    status = bytes(ok(await imap.status("INBOX", "(MESSAGES UNSEEN)"), "STATUS").lines[0])
    counts = re.search(rb"MESSAGES (\d+) UNSEEN (\d+)", status)
    assert counts is not None
    inbox = names["Inbox"]
    assert (int(counts[1]), int(counts[2])) == (inbox["totalItemCount"], inbox["unreadItemCount"])


async def test_nested_mailboxes_are_child_folders(graph: Graph) -> None:
    page = await graph.get("/me/mailFolders?$top=100&$select=displayName,childFolderCount")
    [projets] = [f for f in page["value"] if f["displayName"] == "Projets"]
    assert {"id", "displayName", "childFolderCount"} == set(projets)
    assert 1 == projets["childFolderCount"]
    children = await graph.get(f"/me/mailFolders/{projets['id']}/childFolders?$top=10")
    [cafe] = children["value"]
    assert ("Café Été 2026", projets["id"], 3) == (
        cafe["displayName"],
        cafe["parentFolderId"],
        cafe["totalItemCount"],
    )


async def test_a_folder_by_id_or_well_known_name(graph: Graph) -> None:
    names = {
        "inbox": "Inbox",
        "drafts": "Drafts",
        "sentitems": "Sent Items",
        "deleteditems": "Deleted Items",
        "archive": "Archive",
        "junkemail": "Junk Email",
    }
    for well_known, display in names.items():
        folder = await graph.get(f"/me/mailFolders/{well_known}")
        assert display == folder["displayName"]
        assert folder == await graph.get(f"/me/mailFolders/{folder['id']}")
    selected = await graph.get("/me/mailFolders/inbox?$select=displayName")
    assert {"@odata.context", "id", "displayName"} == set(selected)
    gone = await graph.call("GET", "/me/mailFolders/AAMkRgAAAAAAAAAAAAAAAAAAAAA=")
    assert (404, "ErrorItemNotFound") == (gone.status, gone.json["error"]["code"])
    malformed = await graph.call("GET", "/me/mailFolders/not-an-id")
    assert (400, "ErrorInvalidIdMalformed") == (malformed.status, malformed.json["error"]["code"])


async def test_messages_are_listed_newest_first_with_only_the_selected_members(
    graph: Graph,
) -> None:
    url = (
        "/me/mailFolders/inbox/messages?$top=5&$select=subject,receivedDateTime"
        "&$orderby=receivedDateTime desc"
    )
    page = await graph.get(url)
    assert 5 == len(page["value"]) and page["@odata.nextLink"].startswith(BASE + "/me/")
    for message in page["value"]:
        assert {"@odata.etag", "id", "subject", "receivedDateTime"} == set(message)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", message["receivedDateTime"])
    times = [m["receivedDateTime"] for m in page["value"]]
    assert sorted(times, reverse=True) == times
    ascending = await graph.get(url.replace(" desc", " asc"))
    oldest = [m["receivedDateTime"] for m in ascending["value"]]
    assert sorted(oldest) == oldest and oldest[0] < times[-1]


async def test_a_message_decoded_from_its_mime(graph: Graph, imap: aioimaplib.IMAP4_SSL) -> None:
    message = await by_message_id(graph, "inbox", ENCODED)
    assert "Réunion d'équipe — ordre du jour ✅" == message["subject"]
    assert {"name": "Zoë Ørsted", "address": "zoe@example.org"} == message["from"]["emailAddress"]
    assert ("2026-03-02T08:15:07Z", "2026-03-02T08:15:00Z") == (
        message["receivedDateTime"],
        message["sentDateTime"],
    )
    assert (False, False, "notFlagged", False) == (
        message["isRead"],
        message["isDraft"],
        message["flag"]["flagStatus"],
        message["hasAttachments"],
    )
    single = await graph.get(f"/me/messages/{message['id']}")
    assert message == {k: v for k, v in single.items() if k != "@odata.context"}
    attached = await by_message_id(graph, "inbox", ATTACHED)
    assert attached["hasAttachments"] is True
    assert "Chloé Dubois" == attached["from"]["emailAddress"]["name"]
    replied = await by_message_id(graph, "inbox", "<plain-cc-replyto.202601061403@example.test>")
    assert ["team-ops@example.test"] == [r["emailAddress"]["address"] for r in replied["replyTo"]]
    assert 2 == len(replied["ccRecipients"]) and 2 == len(replied["toRecipients"])
    # $value is the exact MIME Dovecot holds.
    raw = await graph.call("GET", f"/me/messages/{message['id']}/$value")
    ok(await imap.select("INBOX"), "SELECT")
    found = await imap.uid_search(f'HEADER Message-ID "{ENCODED}"', charset=None)
    uid = bytes(found.lines[0]).split()[0].decode()
    fetched = await imap.uid("fetch", uid, "(BODY.PEEK[])")
    assert (200, bytes(fetched.lines[1])) == (raw.status, raw.body)
    missing = await graph.call("GET", "/me/messages/AAMkTW5vLXN1Y2gtZ3VpZA==")
    assert (404, "ErrorItemNotFound") == (missing.status, missing.json["error"]["code"])


async def imap_search(imap: aioimaplib.IMAP4_SSL, *criteria: str) -> int:
    """How many INBOX messages an IMAP SEARCH finds."""
    ok(await imap.select("INBOX"), "SELECT")
    found = await imap.search(*criteria, charset=None)
    return len(bytes(found.lines[0]).split())


async def test_filters_select_what_imap_search_selects(
    graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    async def count(expression: str, orderby: str = "") -> int:
        page = await graph.get(
            f"/me/mailFolders/inbox/messages?$top=1000&$select=id&$filter={expression}{orderby}"
        )
        return len(page["value"])

    since = "receivedDateTime ge 1900-01-01T00:00:00Z"
    assert await imap_search(imap, "UNSEEN") == await count("isRead eq false")
    assert await imap_search(imap, "SEEN") == await count("isRead eq true")
    assert await imap_search(imap, "FLAGGED") == await count("flag/flagStatus eq 'flagged'")
    assert await imap_search(imap, "UNFLAGGED") == await count("flag/flagStatus ne 'flagged'")
    either = "(isRead eq false or flag/flagStatus eq 'flagged')"
    expected = await imap_search(imap, "OR", "UNSEEN", "FLAGGED")
    assert expected == await count(f"{since} and {either}", "&$orderby=receivedDateTime desc")
    window = "receivedDateTime ge 2026-01-05T08:12:07Z and receivedDateTime lt 2026-01-07T00:00:00Z"
    assert 2 == await count(window)
    assert 1 == await count(f"internetMessageId eq '{WELCOME}'")
    assert 0 == await count("internetMessageId eq '<it''s-not-there@example.test>'")


async def test_filters_outside_the_grammar_are_answered_400(
    double: GraphDouble, graph: Graph
) -> None:
    url = "/me/mailFolders/inbox/messages?$filter="
    inefficient = await graph.call("GET", url + "isRead eq false&$orderby=receivedDateTime desc")
    assert (400, "InefficientFilter") == (inefficient.status, inefficient.json["error"]["code"])
    assert "too complex" in inefficient.json["error"]["message"]
    for bad in (
        "subject eq 'x'",
        "isRead eq 1",
        "receivedDateTime ge 2026-01-01",
        "isRead eq false and",
        "(isRead eq false)",
        "(isRead eq false or isRead eq true) and (isRead eq true or isRead eq false)",
        "internetMessageId eq '<unclosed@example.test>",
        "isRead eq false or isRead eq true",
    ):
        answer = await graph.call("GET", url + bad)
        assert (400, "BadRequest") == (answer.status, answer.json["error"]["code"]), bad
    for bad_top in ("0", "1001", "ten"):
        answer = await graph.call("GET", f"/me/mailFolders/inbox/messages?$top={bad_top}")
        assert 400 == answer.status
    unknown = await graph.call("GET", "/me/messages/AAMkTW5v?$select=body")
    assert 400 == unknown.status
    assert [] == double.strays


async def test_page_cap_pages_cover_every_message_once(
    double: GraphDouble, graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    double.page_cap = 7
    url: str | None = (
        "/me/mailFolders/inbox/messages?$top=50&$select=id&$orderby=receivedDateTime asc"
    )
    seen: list[str] = []
    pages = 0
    while url is not None:
        page = await graph.get(url)
        assert len(page["value"]) <= 7
        seen += [m["id"] for m in page["value"]]
        url = page.get("@odata.nextLink")
        pages += 1
    total = await imap_search(imap, "ALL")
    assert (total, total) == (len(seen), len(set(seen)))
    assert -(-total // 7) == pages
    folders: list[str] = []
    next_folders: str | None = "/me/mailFolders?$top=2"
    while next_folders is not None:
        page = await graph.get(next_folders)
        folders += [f["id"] for f in page["value"]]
        next_folders = page.get("@odata.nextLink")
    assert len(folders) == len(set(folders)) and len(folders) >= 7


async def test_a_draft_from_mime_lands_in_its_folder(
    graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    folder = await new_folder(graph)
    mime, message_id = new_mime("=?utf-8?q?Caf=C3=A9?= notes")
    answer = await graph.call("POST", f"/me/mailFolders/{folder['id']}/messages", mime=mime)
    assert 201 == answer.status
    made = answer.json
    assert (folder["id"], True, "Café notes", message_id) == (
        made["parentFolderId"],
        made["isDraft"],
        made["subject"],
        made["internetMessageId"],
    )
    assert {message_id: {"\\Draft"}} == await imap_flags(imap, folder["displayName"])
    raw = await graph.call("GET", f"/me/messages/{made['id']}/$value")
    assert mime == raw.body
    empty = await graph.call(
        "POST", f"/me/mailFolders/{folder['id']}/messages", headers={"Content-Type": "text/plain"}
    )
    assert 400 == empty.status
    url = f"{BASE}/me/mailFolders/{folder['id']}/messages"
    sent = {**HEADERS, "Content-Type": "text/plain"}
    async with graph.session.post(url, data=b"***not base64***", headers=sent) as response:
        error = json.loads(await response.read())["error"]
    assert (400, "Invalid base64 string for MIME content.") == (response.status, error["message"])


async def test_patch_sets_and_clears_read_and_flag(
    graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    folder = await new_folder(graph)
    made, message_id = await new_message(graph, folder["id"])
    url = f"/me/messages/{made['id']}"
    read = await graph.call("PATCH", url, body={"isRead": True})
    assert (200, True) == (read.status, read.json["isRead"])
    assert {"\\Draft", "\\Seen"} == (await imap_flags(imap, folder["displayName"]))[message_id]
    flagged = await graph.call("PATCH", url, body={"flag": {"flagStatus": "flagged"}})
    assert "flagged" == flagged.json["flag"]["flagStatus"]
    assert "\\Flagged" in (await imap_flags(imap, folder["displayName"]))[message_id]
    both = await graph.call(
        "PATCH", url, body={"isRead": False, "flag": {"flagStatus": "notFlagged"}}
    )
    assert (False, "notFlagged") == (both.json["isRead"], both.json["flag"]["flagStatus"])
    assert {"\\Draft"} == (await imap_flags(imap, folder["displayName"]))[message_id]
    assert read.json["changeKey"] != flagged.json["changeKey"]
    for refused in ({"subject": "x"}, {"isRead": "yes"}, {"flag": {"flagStatus": "complete"}}):
        answer = await graph.call("PATCH", url, body=refused)
        assert (400, "BadRequest") == (answer.status, answer.json["error"]["code"]), refused


async def test_copy_makes_a_new_id_and_move_keeps_it(
    graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    source, target = await new_folder(graph), await new_folder(graph)
    made, message_id = await new_message(graph, source["id"])
    copied = await graph.call(
        "POST", f"/me/messages/{made['id']}/copy", body={"destinationId": target["id"]}
    )
    assert 201 == copied.status
    assert copied.json["id"] != made["id"] and target["id"] == copied.json["parentFolderId"]
    assert message_id == copied.json["internetMessageId"]
    assert message_id in await imap_flags(imap, source["displayName"])
    moved = await graph.call(
        "POST", f"/me/messages/{made['id']}/move", body={"destinationId": target["id"]}
    )
    assert (201, made["id"], target["id"]) == (
        moved.status,
        moved.json["id"],
        moved.json["parentFolderId"],
    )
    assert {} == await imap_flags(imap, source["displayName"])
    ok(await imap.select(quote_mailbox(target["displayName"])), "SELECT")
    assert 2 == len(bytes((await imap.search("ALL", charset=None)).lines[0]).split())
    again = await graph.get(f"/me/messages/{made['id']}")
    assert target["id"] == again["parentFolderId"]
    # A well-known name is a destination too; the message comes back by the same id.
    junk = await graph.call(
        "POST", f"/me/messages/{made['id']}/move", body={"destinationId": "junkemail"}
    )
    assert (made["id"], (await graph.get("/me/mailFolders/junkemail"))["id"]) == (
        junk.json["id"],
        junk.json["parentFolderId"],
    )
    back = await graph.call(
        "POST", f"/me/messages/{made['id']}/move", body={"destinationId": source["id"]}
    )
    assert (made["id"], source["id"]) == (back.json["id"], back.json["parentFolderId"])
    nowhere = await graph.call(
        "POST",
        f"/me/messages/{made['id']}/move",
        body={"destinationId": "AAMkRgAAAAAAAAAAAAAAAAAAAAA="},
    )
    assert 404 == nowhere.status


async def test_folders_are_created_and_renamed_in_dovecot(
    graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    parent = await new_folder(graph)
    root = (await graph.get("/me/mailFolders/msgfolderroot"))["id"]
    assert (root, 0, 0) == (
        parent["parentFolderId"],
        parent["totalItemCount"],
        parent["childFolderCount"],
    )
    clash = await graph.call("POST", "/me/mailFolders", body={"displayName": parent["displayName"]})
    assert (409, "ErrorFolderExists") == (clash.status, clash.json["error"]["code"])
    child = await new_folder(graph, parent["id"])
    assert parent["id"] == child["parentFolderId"]
    renamed_to = f"gd-renamed-{uuid.uuid4().hex[:8]}"
    renamed = await graph.call(
        "PATCH", f"/me/mailFolders/{parent['id']}", body={"displayName": renamed_to}
    )
    assert (200, parent["id"], renamed_to) == (
        renamed.status,
        renamed.json["id"],
        renamed.json["displayName"],
    )
    listed = await imap.list('""', quote_mailbox(renamed_to + "*"))
    names = {bytes(line).rsplit(b" ", 1)[-1].strip(b'"').decode() for line in listed.lines[:-1]}
    assert {renamed_to, f"{renamed_to}/{child['displayName']}"} == names
    children = await graph.get(f"/me/mailFolders/{parent['id']}/childFolders")
    assert [child["id"]] == [f["id"] for f in children["value"]]
    refused = await graph.call("PATCH", "/me/mailFolders/inbox", body={"displayName": "Post"})
    assert 403 == refused.status


async def test_send_mail_files_the_mime_in_sent_items(
    double: GraphDouble, graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    mime, message_id = new_mime("Sent through the double")
    answer = await graph.call("POST", "/me/sendMail", mime=mime)
    assert (202, b"") == (answer.status, answer.body)
    assert [mime] == double.sent
    assert {"\\Seen"} == (await imap_flags(imap, "Sent"))[message_id]
    bad = await graph.call("POST", "/me/sendMail", body={"message": {}})
    assert 400 == bad.status and [mime] == double.sent


async def test_delete_takes_the_message_out(graph: Graph, imap: aioimaplib.IMAP4_SSL) -> None:
    folder = await new_folder(graph)
    made, _ = await new_message(graph, folder["id"])
    answer = await graph.call("DELETE", f"/me/messages/{made['id']}")
    assert (204, b"") == (answer.status, answer.body)
    assert {} == await imap_flags(imap, folder["displayName"])
    gone = await graph.call("GET", f"/me/messages/{made['id']}")
    assert 404 == gone.status


async def test_a_request_without_an_accepted_token_gets_401(
    double: GraphDouble, graph: Graph
) -> None:
    missing = await graph.call(
        "GET", "/me", omit=["Authorization"], headers={"client-request-id": "c-1"}
    )
    assert 401 == missing.status
    assert missing.headers["WWW-Authenticate"].startswith("Bearer ")
    error = missing.json["error"]
    assert ["code", "innerError", "message"] == sorted(missing.json["error"])
    assert ["client-request-id", "date", "request-id"] == sorted(error["innerError"])
    assert ("InvalidAuthenticationToken", "c-1") == (
        error["code"],
        error["innerError"]["client-request-id"],
    )
    uuid.UUID(error["innerError"]["request-id"])
    unknown = await graph.call("GET", "/me", headers={"Authorization": "Bearer nope"})
    assert 401 == unknown.status
    double.revoke_tokens()
    revoked = await graph.call("GET", "/me")
    assert (401, "InvalidAuthenticationToken") == (revoked.status, revoked.json["error"]["code"])
    double.accept_token("a-new-one")
    renewed = await graph.call("GET", "/me", headers={"Authorization": "Bearer a-new-one"})
    assert 200 == renewed.status
    assert [] == double.strays


async def test_the_contract_headers_are_required(double: GraphDouble, graph: Graph) -> None:
    no_prefer = await graph.call("GET", "/me", omit=["Prefer"])
    assert (400, "BadRequest") == (no_prefer.status, no_prefer.json["error"]["code"])
    assert "ImmutableId" in no_prefer.json["error"]["message"]
    other_prefer = await graph.call("GET", "/me", headers={"Prefer": 'IdType="RestId"'})
    assert 400 == other_prefer.status
    no_accept = await graph.call("GET", "/me", omit=["Accept"])
    assert 400 == no_accept.status
    both = await graph.call(
        "GET", "/me", headers={"Prefer": 'outlook.body-content-type="text", IdType="ImmutableId"'}
    )
    assert 200 == both.status
    assert [400, 400, 400, 200] == [e.status for e in double.exchanges]
    assert [] == double.strays


async def test_requests_outside_the_contract_are_strays(double: GraphDouble, graph: Graph) -> None:
    for method, url in (
        ("GET", "/me/events"),
        ("GET", "https://graph.microsoft.com/beta/me"),
        ("GET", "/me/mailFolders?$count=true"),
        ("PUT", "/me/messages/AAMkTW5v"),
        ("POST", "/me/messages"),
    ):
        answer = await graph.call(method, url)
        assert 400 == answer.status, url
    assert 5 == len(double.strays) == len(double.exchanges)
    assert ["/v1.0/me/events", "/beta/me"] == [e.path for e in double.strays[:2]]


async def test_status_answers_without_applying(
    double: GraphDouble, graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    double.inject("POST", r"/me/sendMail", Status(503, retry_after=7))
    mime, message_id = new_mime()
    refused = await graph.call("POST", "/me/sendMail", mime=mime)
    assert (503, "ServiceNotAvailable", "7") == (
        refused.status,
        refused.json["error"]["code"],
        refused.headers["Retry-After"],
    )
    assert [] == double.sent and message_id not in await imap_flags(imap, "Sent")
    double.inject("GET", r"/me", Status(429, "ApplicationThrottled"), times=2)
    assert [429, 429, 200] == [(await graph.call("GET", "/me")).status for _ in range(3)]
    double.inject("GET", r"/me", Status(500))
    double.reset_faults()
    assert 200 == (await graph.call("GET", "/me")).status


async def test_apply_then_status_applies_then_fails(
    double: GraphDouble, graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    double.inject("POST", r"/me/sendMail", ApplyThenStatus(503, "ServiceNotAvailable"))
    mime, message_id = new_mime()
    answer = await graph.call("POST", "/me/sendMail", mime=mime)
    assert (503, "ServiceNotAvailable") == (answer.status, answer.json["error"]["code"])
    assert [mime] == double.sent
    assert {"\\Seen"} == (await imap_flags(imap, "Sent"))[message_id]


async def test_drop_aborts_the_connection_with_or_without_the_effect(
    double: GraphDouble, graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    folder = await new_folder(graph)
    made, message_id = await new_message(graph, folder["id"])
    url = f"/me/messages/{made['id']}"
    for apply in (False, True):
        double.inject("PATCH", r"/me/messages/[^/]+", Drop(apply=apply))
        with pytest.raises(aiohttp.ClientConnectionError):
            await graph.call("PATCH", url, body={"isRead": True})
        assert 0 == double.exchanges[-1].status
        seen = "\\Seen" in (await imap_flags(imap, folder["displayName"]))[message_id]
        assert apply == seen
    assert 200 == (await graph.call("GET", url)).status


async def test_delay_answers_late_and_a_gone_client_leaves_no_effect(
    double: GraphDouble, graph: Graph, imap: aioimaplib.IMAP4_SSL
) -> None:
    double.inject("GET", r"/me", Delay(0.5))
    started = time.monotonic()
    assert 200 == (await graph.call("GET", "/me")).status
    assert time.monotonic() - started >= 0.45
    folder = await new_folder(graph)
    made, message_id = await new_message(graph, folder["id"])
    double.inject("PATCH", r"/me/messages/[^/]+", Delay(1.5, apply=False))
    url = f"/me/messages/{made['id']}"
    with pytest.raises(TimeoutError):
        await graph.call("PATCH", url, body={"isRead": True}, seconds=0.5)
    for _ in range(100):  # the double looks at the connection when its wait is over
        if not double.in_flight:
            break
        await asyncio.sleep(0.05)
    [patch] = [e for e in double.exchanges if e.method == "PATCH"]
    flags = (await imap_flags(imap, folder["displayName"]))[message_id]
    assert (0, {"\\Draft"}) == (patch.status, flags)


async def test_a_fifth_concurrent_request_gets_429(double: GraphDouble, graph: Graph) -> None:
    double.inject("GET", r"/me", Delay(2.0), times=4)
    answers = await asyncio.gather(*(graph.call("GET", "/me") for _ in range(5)))
    assert [200, 200, 200, 200, 429] == sorted(a.status for a in answers)
    [limited] = [a for a in answers if a.status == 429]
    assert ("MailboxConcurrency", "1") == (
        limited.json["error"]["code"],
        limited.headers["Retry-After"],
    )


async def test_msgraph_sdk_accepts_one_exchange_of_every_endpoint(
    double: GraphDouble, graph: Graph, tmp_path: Path
) -> None:
    me = "/me?$select=id,mail,userPrincipalName"
    await graph.get(me)  # E1
    top = await graph.get("/me/mailFolders?$top=100&$select=displayName,childFolderCount")  # E2
    [projets] = [f for f in top["value"] if f["displayName"] == "Projets"]
    await graph.get(f"/me/mailFolders/{projets['id']}/childFolders?$top=5")  # E3
    await graph.get("/me/mailFolders/inbox")  # E4
    listing = (
        "/me/mailFolders/inbox/messages?$top=3&$select=subject,from,isRead,receivedDateTime"
        "&$orderby=receivedDateTime desc&$filter=receivedDateTime ge 2026-01-01T00:00:00Z"
        " and (isRead eq false or flag/flagStatus eq 'flagged')"
    )
    page = await graph.get(listing)  # E5
    await graph.get(page["@odata.nextLink"])  # E5 again, by its nextLink
    await graph.get(f"/me/messages/{page['value'][0]['id']}")  # E6
    folder = await new_folder(graph)  # E12
    made, _ = await new_message(graph, folder["id"])  # E8
    assert 200 == (await graph.call("GET", f"/me/messages/{made['id']}/$value")).status  # E7
    flags = {"isRead": True, "flag": {"flagStatus": "flagged"}}
    assert 200 == (await graph.call("PATCH", f"/me/messages/{made['id']}", body=flags)).status
    destination = {"destinationId": "drafts"}
    copied = await graph.call("POST", f"/me/messages/{made['id']}/copy", body=destination)
    destination = {"destinationId": folder["id"]}
    moved = await graph.call("POST", f"/me/messages/{copied.json['id']}/move", body=destination)
    assert (201, 201) == (copied.status, moved.status)  # E10, E11
    await new_folder(graph, folder["id"])  # E12 under a parent
    renamed = {"displayName": f"gd-{uuid.uuid4().hex[:10]}"}
    patched = await graph.call("PATCH", f"/me/mailFolders/{folder['id']}", body=renamed)  # E13
    assert 200 == patched.status
    mime, _ = new_mime()
    sent = await graph.call("POST", "/me/sendMail", mime=mime)
    assert 202 == sent.status, sent.body  # E14
    assert 204 == (await graph.call("DELETE", f"/me/messages/{moved.json['id']}")).status  # E15
    assert 404 == (await graph.call("GET", f"/me/messages/{moved.json['id']}")).status
    assert [] == double.strays
    # Two tampered copies show the referee is awake: a member Message does not have, and an
    # OData option without its "$".
    [single] = [e for e in double.exchanges if e.model == "Message" and e.method == "GET"]
    answer = {**json.loads(single.response_body), "importanceLevel": "high"}
    tampered = [
        replace(single, response_body=json.dumps(answer).encode()),
        replace(double.exchanges[0], query=[("select", "id,mail,userPrincipalName")]),
    ]
    report = check_against_sdk([*double.exchanges, *tampered], tmp_path)
    # 18 real requests (15 with JSON answers) and the tampered answer; the request whose query
    # the SDK cannot make is not built, so not counted.
    assert (19, 17) == (report.requests_checked, report.responses_checked)
    assert 15 == sum(1 for e in double.exchanges if e.model)
    failed = {r["index"]: r["problems"] for r in report.results if not r["ok"]}
    assert [18, 19] == sorted(failed), report.problems()
    assert "'importanceLevel' is no member of Message" in failed[18][0]
    assert "no query option 'select'" in failed[19][0]


def test_a_missing_referee_is_an_error_not_a_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(contract, "SDK_PYTHON", tmp_path / "no-venv" / "python")
    with pytest.raises(SdkUnavailable, match="scripts/bootstrap"):
        check_against_sdk([], tmp_path)
