"""The tools on a `microsoft` deployment, against the Graph contract double.

The MCP client is in process; the token endpoint (login.microsoftonline.com) and the double
(graph.microsoft.com) are HTTPS servers on loopback reached through the pinned-host test seam,
and the double keeps its mail in the real Dovecot. The double is our model of Graph (shaped
after Microsoft's docs and refereed by msgraph-sdk's models in test_graph_contract.py), not
Microsoft: live Graph is checked only by scripts/graph-smoke.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from support.angelos_process import free_port
from support.graph_deploy import GraphRig, call, ok
from support.graph_double import Status
from support.inprocess import mcp_client

pytestmark = pytest.mark.services

WELCOME_ID = "plain-welcome.202601050912@example.test"


async def refused(client: Any, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
    failed, body = await call(client, tool, arguments)
    assert failed and code == body["error_code"], body
    return body


async def search(client: Any, **filters: Any) -> dict[str, Any]:
    return await ok(client, "mail_query", {"action": "search", "search": filters})


async def own_folder(client: Any, graph: GraphRig) -> str:
    """A new top-level folder for this test; its native ID."""
    name = f"graph-{uuid.uuid4().hex[:10]}"
    await ok(client, "mail_create", {"action": "folder", "name": name})
    listed = await ok(client, "mail_query", {"action": "folders"})
    [folder] = [f for f in listed["folders"] if f.get("display_name") == name]
    return str(folder["name"])


async def own_draft(client: Any, folder: str, subject: str = "Graph draft") -> dict[str, Any]:
    """Save a draft into `folder`; its Graph reference."""
    message = {"to": ["pat@example.test"], "subject": subject, "text": "Draft body"}
    saved = await ok(
        client, "mail_create", {"action": "draft", "message": message, "folder": folder}
    )
    assert "appended" == saved["status"], saved
    return dict(saved["destination"])


async def test_capabilities_say_what_graph_can_and_cannot_do(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        caps = await ok(client, "mail_query", {"action": "capabilities"})
    server = caps["server"]
    assert "microsoft_graph" == server["provider"]
    assert ["\\Seen", "\\Flagged"] == server["supported_flags"]
    assert (True, False, False, False) == (
        server["move"], server["condstore"], server["uid_expunge"], server["permanent_delete"]
    )  # fmt: skip
    assert {"\\Inbox", "\\Drafts", "\\Sent", "\\Trash", "\\Archive"} == set(
        server["special_folders"]
    )
    assert any("MODSEQ" in w and "permanent delete" in w for w in server["warnings"])
    assert caps["smtp_stores_sent"] is True and caps["permanent_delete_enabled"] is False


async def test_every_operation_checks_the_account_first(graph: GraphRig) -> None:
    graph.double.identity(id="another-account-0000")
    async with mcp_client(graph.env()) as (client, _):
        body = await refused(client, "mail_query", {"action": "folders"}, "service_unavailable")
        assert "MICROSOFT_ACCOUNT_ID" in body["error"]
        name = f"never-{uuid.uuid4().hex[:8]}"
        await refused(
            client, "mail_create", {"action": "folder", "name": name}, "service_unavailable"
        )
    assert [] == graph.requests("POST", "/me/mailFolders")  # nothing was written


async def test_folders_are_native_ids_breadth_first_with_display_names(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        listed = (await ok(client, "mail_query", {"action": "folders"}))["folders"]
    shown = [f["display_name"] for f in listed]
    assert {"Inbox", "Drafts", "Sent Items", "Deleted Items", "Archive", "Projets"} <= set(shown)
    # Breadth first: the nested folder comes after every top-level one.
    assert shown.index("Café Été 2026") > max(shown.index(n) for n in ("Inbox", "Projets"))
    inbox = listed[shown.index("Inbox")]
    assert ["\\Inbox"] == inbox["attributes"] and "" == inbox["delimiter"]
    assert all(
        set(f["name"]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=-")
        for f in listed
    )


async def test_search_pages_by_received_date_with_whole_references(graph: GraphRig) -> None:
    graph.double.page_cap = 10
    async with mcp_client(graph.env()) as (client, _):
        seen: list[str] = []
        page = await search(client, limit=10)
        pages = 1
        while True:
            assert "microsoft_graph" == page["provider"] and page["warnings"], page
            assert "uid_validity" not in page and "scanned_uids" not in page
            for row in page["messages"]:
                ref = row["reference"]
                assert ("microsoft_graph", graph.double.account_id) == (
                    ref["provider"], ref["account"]
                )  # fmt: skip
                seen.append(ref["id"])
            if "next_cursor" not in page:
                break
            page = await search(client, limit=10, cursor=page["next_cursor"])
            pages += 1
    assert 41 == len(seen) == len(set(seen))  # every INBOX message exactly once
    assert 5 == pages


async def test_a_foreign_cursor_is_refused_before_any_request(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        page = await search(client, limit=5)
        before = len(graph.double.exchanges)
        other = {"limit": 5, "unread": True, "cursor": page["next_cursor"]}
        await refused(
            client, "mail_query", {"action": "search", "search": other}, "invalid_arguments"
        )
        assert before == len(graph.double.exchanges)


async def test_filters_graph_indexes_and_literal_text_filters(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        by_id = await search(client, message_id=WELCOME_ID)
        [row] = by_id["messages"]
        unread = await search(client, unread=True, limit=50)
        assert all("\\Seen" not in r["flags"] for r in unread["messages"])
        assert row["reference"]["id"] not in [r["reference"]["id"] for r in unread["messages"]]
        subject = row["subject"]
        by_subject = await search(client, subject=subject[2:8].upper(), order="oldest")
        assert row["reference"]["id"] in [r["reference"]["id"] for r in by_subject["messages"]]
    [listing] = [
        e
        for e in graph.double.exchanges
        if (
            "$filter",
            f"receivedDateTime ge 1900-01-01T00:00:00Z and internetMessageId eq '<{WELCOME_ID}>'",
        )
        in e.query
    ]
    assert 200 == listing.status


async def test_read_and_read_many_never_mark_read(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        unread = await search(client, unread=True, limit=3)
        refs = [r["reference"] for r in unread["messages"]]
        first = await ok(
            client, "mail_query", {"action": "read", "reference": refs[0], "detail": "full"}
        )
        assert refs[0] == first["reference"] and first["text"]
        many = await ok(client, "mail_query", {"action": "read_many", "references": refs})
        assert ["ok"] * len(refs) == [item["status"] for item in many["items"]]
        again = await search(client, unread=True, limit=3)
    assert refs == [r["reference"] for r in again["messages"]]
    assert [] == graph.requests("PATCH", "/me/messages")


async def test_an_imap_reference_is_refused_before_any_request(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        before = len(graph.double.exchanges)
        imap_ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
        await refused(
            client, "mail_query", {"action": "read", "reference": imap_ref}, "invalid_arguments"
        )
        foreign = {
            "folder": "AAMkF",
            "provider": "microsoft_graph",
            "account": "someone-else",
            "id": "AAMkM",
        }
        await refused(
            client, "mail_query", {"action": "read", "reference": foreign}, "invalid_arguments"
        )
        assert before == len(graph.double.exchanges)


async def test_seen_and_flagged_change_and_nothing_else(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        folder = await own_folder(client, graph)
        ref = await own_draft(client, folder)
        changed = await ok(
            client,
            "mail_modify",
            {
                "action": "flags",
                "reference": ref,
                "operation": "add",
                "flags": ["\\Seen", "\\Flagged"],
            },
        )
        assert {"\\Seen", "\\Flagged"} <= set(changed["flags"]) and changed["conditional"] is False
        cleared = await ok(
            client,
            "mail_modify",
            {"action": "flags", "reference": ref, "operation": "remove", "flags": ["\\Flagged"]},
        )
        assert "\\Flagged" not in cleared["flags"] and "\\Seen" in cleared["flags"]
        before = len(graph.double.exchanges)
        await refused(
            client,
            "mail_modify",
            {"action": "flags", "reference": ref, "operation": "add", "flags": ["\\Answered"]},
            "unsupported_operation",
        )
        await refused(
            client,
            "mail_modify",
            {
                "action": "flags",
                "reference": ref,
                "operation": "add",
                "flags": ["\\Seen"],
                "unchanged_since": 5,
            },
            "unsupported_operation",
        )
        assert before == len(graph.double.exchanges)


async def test_copy_move_and_trash_report_where_the_message_went(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        source_folder = await own_folder(client, graph)
        target = await own_folder(client, graph)
        ref = await own_draft(client, source_folder)
        copied = await ok(
            client, "mail_create", {"action": "copy", "reference": ref, "destination": target}
        )
        assert "copied" == copied["status"] and target == copied["destination"]["folder"]
        assert copied["destination"]["id"] != ref["id"]
        moved = await ok(
            client, "mail_modify", {"action": "move", "reference": ref, "destination": target}
        )
        assert "moved" == moved["status"]
        assert (ref["id"], target) == (moved["destination"]["id"], moved["destination"]["folder"])
        # The old reference names the old folder: stale, never silently followed.
        await refused(client, "mail_query", {"action": "read", "reference": ref}, "stale_reference")
        trashed = await ok(
            client, "mail_modify", {"action": "trash", "reference": moved["destination"]}
        )
        caps = await ok(client, "mail_query", {"action": "capabilities"})
        assert caps["server"]["special_folders"]["\\Trash"] == [trashed["destination"]["folder"]]


async def test_folders_are_created_and_renamed_by_display_name(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        folder = await own_folder(client, graph)
        new = f"renamed-{uuid.uuid4().hex[:8]}"
        await ok(client, "mail_modify", {"action": "rename", "old": folder, "new": new})
        listed = (await ok(client, "mail_query", {"action": "folders"}))["folders"]
    assert [new] == [f["display_name"] for f in listed if f["name"] == folder]


async def test_drafts_are_saved_read_and_revised_as_mime(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        saved = await ok(
            client,
            "mail_create",
            {
                "action": "draft",
                "message": {"to": ["pat@example.test"], "subject": "Plan", "text": "First"},
            },
        )
        ref = saved["destination"]
        caps = await ok(client, "mail_query", {"action": "capabilities"})
        assert caps["server"]["special_folders"]["\\Drafts"] == [ref["folder"]]
        draft = await ok(client, "mail_query", {"action": "draft", "reference": ref})
        assert "First" in draft["message"]["text"]
        revised = await ok(
            client,
            "mail_create",
            {
                "action": "revise_draft",
                "reference": ref,
                "source_digest": draft["source_digest"],
                "changes": {"text": "Second"},
            },
        )
        new_ref = revised["revision"]["destination"]
        assert new_ref["id"] != ref["id"]
        again = await ok(client, "mail_query", {"action": "draft", "reference": new_ref})
        assert "Second" in again["message"]["text"]
    [upload, *_] = graph.requests("POST", "/me/mailFolders/drafts/messages")
    assert "text/plain" == upload.headers.get("Content-Type")


async def test_what_graph_cannot_do_is_refused_with_its_reason(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        [row] = (await search(client, message_id=WELCOME_ID))["messages"]
        ref = row["reference"]
        body = await refused(
            client,
            "mail_query",
            {"action": "conversation", "reference": ref},
            "unsupported_operation",
        )
        assert "conversation" in body["error"]
        body = await refused(client, "mail_delete_permanently", ref, "unsupported_operation")
        assert "Microsoft Graph" in body["error"]
    assert [] == graph.requests("DELETE", "/me/messages")


async def test_a_throttled_read_waits_once_and_a_second_refusal_is_unavailable(
    graph: GraphRig,
) -> None:
    async with mcp_client(graph.env()) as (client, _):
        await ok(client, "mail_query", {"action": "folders"})  # a token, and the account checked
        graph.double.inject(
            "GET", "/me/mailFolders", Status(429, "ApplicationThrottled", retry_after=1)
        )
        listed = await ok(client, "mail_query", {"action": "folders"})
        assert listed["folders"]
        graph.double.inject(
            "GET", "/me/mailFolders", Status(503, "ServiceUnavailable", retry_after=1), times=2
        )
        await refused(client, "mail_query", {"action": "folders"}, "service_unavailable")


async def test_a_flag_change_whose_answer_is_a_5xx_is_unknown(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        folder = await own_folder(client, graph)
        ref = await own_draft(client, folder)
        graph.double.inject(
            "PATCH", "/me/messages/.*", Status(503, "ServiceUnavailable", retry_after=1)
        )
        body = await refused(
            client,
            "mail_modify",
            {"action": "flags", "reference": ref, "operation": "add", "flags": ["\\Flagged"]},
            "outcome_unknown",
        )
        assert body["outcome"]["warnings"], body
    assert 1 == len(graph.requests("PATCH", "/me/messages"))  # a write's 503 is never repeated


async def test_a_refused_access_token_is_replaced_once(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        await ok(client, "mail_query", {"action": "folders"})
        minted = len(graph.endpoint.minted)
        graph.double.revoke_tokens()
        await ok(client, "mail_query", {"action": "folders"})
    assert minted + 1 == len(graph.endpoint.minted)


async def test_attachments_come_from_the_mime_and_a_large_message_is_read_bounded(
    graph: GraphRig,
) -> None:
    pdf_id = "attachment-small-pdf.202602090940@example.test"
    big_id = "attachment-over-5mib-total.202602122359@example.test"
    async with mcp_client(graph.env()) as (client, _):
        [pdf] = (await search(client, message_id=pdf_id))["messages"]
        listed = await ok(client, "mail_query", {"action": "read", "reference": pdf["reference"]})
        got = await ok(
            client,
            "mail_query",
            {"action": "attachment", "reference": pdf["reference"], "index": 1},
        )
        assert listed["attachments"][0] == got["attachment"]
        assert got["data_base64"].startswith("JVBERi")  # %PDF
        [big] = (await search(client, message_id=big_id))["messages"]
        read = await ok(client, "mail_query", {"action": "read", "reference": big["reference"]})
        assert read["truncated"] is True and read["warnings"], read


async def test_a_rotated_refresh_token_is_the_next_one_sent_and_is_stored_encrypted(
    graph: GraphRig,
) -> None:
    rotated: list[str] = []

    def rotate() -> str:
        rotated.append(f"M.rotated-{uuid.uuid4().hex}")
        return rotated[-1]

    graph.endpoint.returned_refresh_token = rotate
    env = graph.env()
    async with mcp_client(env) as (client, app):
        await ok(client, "mail_query", {"action": "folders"})
        graph.double.revoke_tokens()  # the next call needs a new access token
        await ok(client, "mail_query", {"action": "folders"})
        assert app.sending.store is not None
        redis = app.sending.store.client
        keys = [k async for k in redis.scan_iter(match="angelos:microsoft:refresh:v1:*")]
        stored = [await redis.get(k) for k in keys]
    sent = [r.form["refresh_token"][0] for r in graph.endpoint.requests]
    assert [env["MICROSOFT_REFRESH_TOKEN"], rotated[0]] == sent[-2:]
    assert rotated[-1].encode() not in b"".join(v for v in stored if isinstance(v, bytes))
    assert any(isinstance(v, bytes) and v.startswith(b"v1.") for v in stored)


async def test_an_unreachable_store_fails_closed_before_any_token_request(
    graph: GraphRig,
) -> None:
    env = graph.env(ANGELOS_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    async with mcp_client(env) as (client, app):
        assert not app.sending.usable  # no durable store: sending is off
        body = await refused(client, "mail_query", {"action": "folders"}, "service_unavailable")
        await refused(
            client, "mail_prepare", {"action": "new", "message": {"to": ["a@b.test"]}},
            "deployment_disabled",
        )  # fmt: skip
    assert "token" in body["error"].lower() or "store" in body["error"].lower(), body
    assert (0, []) == (graph.endpoint.count, graph.double.exchanges)
