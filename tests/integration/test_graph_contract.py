"""The requests angelos makes to Graph, and the answers the double gives, refereed by msgraph-sdk.

One session drives every Graph operation angelos has through the MCP tools against the
contract double. Then msgraph-sdk 1.65.0 (its own venv, tests/graph_sdk) checks every exchange:
each request against what its request builders make for the same call (method, path, query
parameters, JSON body members), and each JSON answer parsed by its own model classes with no
member they do not know. The double cannot drift from Microsoft's published schema, and
angelos cannot ask for something the schema does not have, without a failure here.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.graph_deploy import GraphRig, graph_rig
from support.graph_double import Exchange, check_against_sdk
from support.graph_double.contract import SdkReport
from support.inprocess import mcp_client
from support.services import Services

pytestmark = pytest.mark.services

WELCOME_ID = "plain-welcome.202601050912@example.test"
WELL_KNOWN = {"inbox", "drafts", "sentitems", "deleteditems", "archive", "junkemail"}
# Every request shape angelos makes to Graph (method and route, IDs abstracted).
EXPECTED_SHAPES = {
    "GET /me",
    "GET /me/mailFolders",
    "GET /me/mailFolders/{id}/childFolders",
    "GET /me/mailFolders/{well-known}",
    "GET /me/mailFolders/{id}/messages",
    "GET /me/mailFolders/{well-known}/messages",
    "GET /me/messages/{id}",
    "GET /me/messages/{id}/$value",
    "POST /me/mailFolders",
    "PATCH /me/mailFolders/{id}",
    "POST /me/mailFolders/{well-known}/messages",
    "POST /me/mailFolders/{id}/messages",
    "PATCH /me/messages/{id}",
    "POST /me/messages/{id}/copy",
    "POST /me/messages/{id}/move",
    "POST /me/sendMail",
}


def shape(exchange: Exchange) -> str:
    """Method and route with every native ID replaced by {id} (well-known names kept apart)."""
    parts = exchange.route.split("/")
    for n, part in enumerate(parts):
        after_collection = n > 0 and parts[n - 1] in ("messages", "mailFolders", "childFolders")
        if after_collection and part and part != "$value":
            parts[n] = "{well-known}" if part in WELL_KNOWN else "{id}"
    return f"{exchange.method} {'/'.join(parts)}"


async def ok(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.structured_content
    return dict(result.structured_content)


async def every_operation(graph: GraphRig) -> None:
    """One session that makes every kind of Graph request angelos has."""
    graph.double.page_cap = 10
    async with mcp_client(graph.env()) as (client, _):
        await ok(client, "mail_query", {"action": "capabilities"})
        await ok(client, "mail_query", {"action": "folders"})
        page = await ok(client, "mail_query", {"action": "search", "search": {"limit": 10}})
        following = {"limit": 10, "cursor": page["next_cursor"]}
        await ok(client, "mail_query", {"action": "search", "search": following})
        filters = {"unread": True, "since": "2026-01-01", "before": "2027-01-01", "limit": 5}
        await ok(client, "mail_query", {"action": "triage", "search": filters})
        found = await ok(
            client, "mail_query", {"action": "search", "search": {"message_id": WELCOME_ID}}
        )
        [row] = found["messages"]
        await ok(client, "mail_query", {"action": "search", "search": {"query": "welcome"}})
        await ok(client, "mail_query", {"action": "read", "reference": row["reference"]})
        refs = [r["reference"] for r in page["messages"][:3]]
        await ok(client, "mail_query", {"action": "read_many", "references": refs})
        name = f"contract-{uuid.uuid4().hex[:8]}"
        await ok(client, "mail_create", {"action": "folder", "name": name})
        listed = await ok(client, "mail_query", {"action": "folders"})
        [folder] = [f["name"] for f in listed["folders"] if f.get("display_name") == name]
        await ok(client, "mail_modify", {"action": "rename", "old": folder, "new": name + "-b"})
        await ok(client, "mail_query", {"action": "search", "search": {"folder": folder}})
        message = {"to": ["pat@example.test"], "subject": "Contract", "text": "Draft"}
        saved = await ok(client, "mail_create", {"action": "draft", "message": message})
        draft = await ok(
            client, "mail_query", {"action": "draft", "reference": saved["destination"]}
        )
        revised = await ok(
            client,
            "mail_create",
            {
                "action": "revise_draft",
                "reference": saved["destination"],
                "source_digest": draft["source_digest"],
                "changes": {"text": "Revised"},
                "folder": folder,
            },
        )
        ref = revised["revision"]["destination"]
        flags = {"action": "flags", "reference": ref, "operation": "add", "flags": ["\\Flagged"]}
        await ok(client, "mail_modify", flags)
        await ok(client, "mail_modify", {**flags, "operation": "remove", "flags": ["\\Seen"]})
        copied = await ok(
            client, "mail_create", {"action": "copy", "reference": ref, "destination": "inbox"}
        )
        moved = await ok(
            client, "mail_modify", {"action": "move", "reference": ref, "destination": "archive"}
        )
        await ok(client, "mail_modify", {"action": "trash", "reference": moved["destination"]})
        await ok(client, "mail_modify", {"action": "trash", "reference": copied["destination"]})
        prepared = await ok(
            client,
            "mail_prepare",
            {"action": "new", "message": {"to": ["pat@example.test"], "text": "Sent"}},
        )
        sent = await ok(
            client,
            "mail_send_confirmed",
            {
                "prepared_id": prepared["prepared_id"],
                "confirmed_digest": prepared["digest"],
                "append_sent": False,
            },
        )
        assert "accepted" == sent["status"], sent
        bare = prepared["message_id"].strip("<>")
        sent_items = {"folder": "sentitems", "message_id": bare}
        await ok(client, "mail_query", {"action": "search", "search": sent_items})


class Contract:
    """The exchanges of one full session and msgraph-sdk's report on them."""

    def __init__(self, exchanges: list[Exchange], strays: list[Exchange], report: SdkReport):
        self.exchanges = exchanges
        self.strays = strays
        self.report = report


@pytest.fixture(scope="module")
def contract(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Contract]:
    async def run() -> tuple[list[Exchange], list[Exchange]]:
        async with graph_rig(services) as graph:
            await every_operation(graph)
            return list(graph.double.exchanges), list(graph.double.strays)

    exchanges, strays = asyncio.run(run())
    report = check_against_sdk(exchanges, Path(tmp_path_factory.mktemp("graph-contract")))
    print(
        f"msgraph-sdk checked {report.requests_checked} requests and "
        f"{report.responses_checked} JSON answers in {len(exchanges)} exchanges; "
        f"{len({shape(e) for e in exchanges})} request shapes"
    )
    yield Contract(exchanges, strays, report)


def test_every_request_is_what_msgraph_sdk_builds_for_the_same_call(contract: Contract) -> None:
    request_problems = [p for p in contract.report.problems() if "request" in p]
    assert [] == request_problems
    assert contract.report.requests_checked == len(contract.exchanges)


def test_every_json_answer_parses_with_msgraph_sdk_models_and_no_unknown_member(
    contract: Contract,
) -> None:
    assert [] == contract.report.problems()
    json_answers = [e for e in contract.exchanges if e.model is not None]
    assert len(json_answers) == contract.report.responses_checked > 0


def test_every_kind_of_request_angelos_makes_was_refereed(contract: Contract) -> None:
    assert EXPECTED_SHAPES == {shape(e) for e in contract.exchanges}


def test_nothing_was_asked_outside_the_contract(contract: Contract) -> None:
    assert [] == contract.strays
    assert all(e.status in (200, 201, 202) for e in contract.exchanges), [
        (e.method, e.route, e.status) for e in contract.exchanges if e.status >= 300
    ]


def test_every_request_carries_the_immutable_id_preference(contract: Contract) -> None:
    prefer = {e.headers.get("Prefer") for e in contract.exchanges}
    assert {'IdType="ImmutableId"'} == prefer
    assert all(
        re.fullmatch(r"[0-9a-f-]{36}", e.headers.get("client-request-id", ""))
        for e in contract.exchanges
    )
