"""Sending through Microsoft Graph under the ledger, against the Graph contract double.

The one request that can send (`POST /me/sendMail`) is the commit point's request: it is made
exactly once, whatever comes back. 202 is `accepted` (queued); a 4xx provably not sent; a 5xx,
a dropped connection or a reply past the deadline `unknown`, and an unknown send becomes
`accepted` only on evidence: the message with its exact Message-ID in Sent Items. Each test
counts the sendMail requests the double received and the messages it queued.

Behaviour modelled from Microsoft's documentation:
- sendMail with MIME (base64, text/plain) answers 202 Accepted, files the message in Sent Items
  (saveToSentItems defaults to true), and 400 for invalid base64:
  https://learn.microsoft.com/en-us/graph/api/user-sendmail
- throttling answers 429 with Retry-After:
  https://learn.microsoft.com/en-us/graph/throttling
- the error body `{"error": {"code", "message", "innerError"}}`:
  https://learn.microsoft.com/en-us/graph/errors
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ledger.dispatch.evidence import Search, search_and_record
from support.graph_deploy import GraphRig, call, ok
from support.graph_double import ApplyThenStatus, Delay, Drop, Status
from support.inprocess import mcp_client
from support.pinned_process import run_pinned
from support.services import Services

pytestmark = pytest.mark.services


async def prepare(client: Any, **message: Any) -> dict[str, Any]:
    recipient = f"to-{uuid.uuid4().hex[:8]}@example.test"
    fields = {"to": [recipient], "subject": "Graph send", "text": "Over Graph", **message}
    return await ok(client, "mail_prepare", {"action": "new", "message": fields})


async def confirm(client: Any, prepared: dict[str, Any], append_sent: bool = False) -> Any:
    arguments = {
        "prepared_id": prepared["prepared_id"],
        "confirmed_digest": prepared["digest"],
        "append_sent": append_sent,
    }
    return await call(client, "mail_send_confirmed", arguments)


async def status(client: Any, prepared: dict[str, Any]) -> dict[str, Any]:
    query = {"action": "send_status", "prepared_id": prepared["prepared_id"]}
    return await ok(client, "mail_query", query)


async def operator_search(app: Any, prepared: dict[str, Any]) -> Search:
    """What `angelos ledger evidence` does, in process: search Sent Items, record if found."""
    store, pid = app.sending.store, prepared["prepared_id"]
    _, entries = await store.read(pid)
    return await search_and_record(store, pid, entries, app.mailbox, "operator:graph-test")


def send_requests(graph: GraphRig) -> list[Any]:
    return graph.requests("POST", "/me/sendMail")


async def in_sent_items(client: Any, message_id: str) -> list[dict[str, Any]]:
    bare = message_id.strip("<>")
    page = await ok(
        client,
        "mail_query",
        {"action": "search", "search": {"folder": "sentitems", "message_id": bare}},
    )
    return list(page["messages"])


async def test_a_send_is_one_sendmail_with_the_bcc_bearing_mime(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        prepared = await prepare(client, cc=["cc@example.test"], bcc=["hidden@example.test"])
        assert any("Sent" in w for w in prepared["warnings"]), prepared["warnings"]
        failed, answer = await confirm(client, prepared)
        assert not failed and "accepted" == answer["status"], answer
        final = await status(client, prepared)
        assert "accepted" == final["status"], final
        [copy] = await in_sent_items(client, prepared["message_id"])
    [request] = send_requests(graph)
    assert "text/plain" == request.headers.get("Content-Type") and 202 == request.status
    [mime] = graph.double.sent
    head = mime.split(b"\r\n\r\n", 1)[0]
    assert b"Bcc: <hidden@example.test>\r\n" in head and prepared["message_id"].encode() in head
    assert copy["reference"]["provider"] == "microsoft_graph"


async def test_append_sent_is_refused_before_the_claim(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        prepared = await prepare(client)
        failed, body = await confirm(client, prepared, append_sent=True)
        assert failed and "append_sent=false" in body["error"], body
        assert "prepared" == (await status(client, prepared))["status"]
    assert [] == send_requests(graph)


async def test_a_5xx_after_queueing_is_unknown_until_evidence_proves_it(graph: GraphRig) -> None:
    graph.double.inject("POST", "/me/sendMail", ApplyThenStatus(503, "ServiceUnavailable"))
    async with mcp_client(graph.env()) as (client, app):
        prepared = await prepare(client)
        _, body = await confirm(client, prepared)
        assert "unknown" == (body.get("status") or body.get("outcome", {}).get("status")), body
        final = await status(client, prepared)
        assert "unknown" == final["status"], final
        search = await operator_search(app, prepared)
        assert ("recorded", 1) == (search.result, len(search.copies)), search
        assert search.evidence is not None and search.evidence.graph_id == search.copies[0].graph_id
        proven = await status(client, prepared)
        assert ("accepted", "sent_copy") == (proven["status"], proven.get("evidence")), proven
    assert 1 == len(send_requests(graph)) and 1 == len(graph.double.sent)


async def test_a_connection_dropped_after_the_request_is_unknown_and_never_repeated(
    graph: GraphRig,
) -> None:
    graph.double.inject("POST", "/me/sendMail", Drop(apply=False))
    async with mcp_client(graph.env()) as (client, app):
        prepared = await prepare(client)
        await confirm(client, prepared)
        assert "unknown" == (await status(client, prepared))["status"]
        search = await operator_search(app, prepared)
        assert "absent" == search.result  # absence proves nothing: it stays unknown
        assert "unknown" == (await status(client, prepared))["status"]
        failed, again = await confirm(client, prepared)
        assert failed or again.get("status") == "unknown", again
    assert 1 == len(send_requests(graph)) and [] == graph.double.sent


async def test_a_reply_past_the_deadline_is_unknown(graph: GraphRig) -> None:
    graph.double.inject("POST", "/me/sendMail", Delay(5.0, apply=True))
    async with mcp_client(graph.env(MAIL_TIMEOUT="2s")) as (client, _):
        prepared = await prepare(client)
        await confirm(client, prepared)
        assert "unknown" == (await status(client, prepared))["status"]
    assert 1 == len(send_requests(graph))


@pytest.mark.parametrize(
    ("code", "error"), [(400, "ErrorInvalidRecipients"), (429, "ApplicationThrottled")]
)
async def test_a_4xx_is_rejected_and_never_retried(graph: GraphRig, code: int, error: str) -> None:
    graph.double.inject("POST", "/me/sendMail", Status(code, error, retry_after=1))
    async with mcp_client(graph.env()) as (client, _):
        prepared = await prepare(client)
        await confirm(client, prepared)
        final = await status(client, prepared)
        assert "rejected" == final["status"], final
    assert 1 == len(send_requests(graph)) and [] == graph.double.sent


async def test_an_account_mismatch_at_send_time_is_provably_not_sent(graph: GraphRig) -> None:
    async with mcp_client(graph.env()) as (client, _):
        prepared = await prepare(client)
        graph.double.identity(id="someone-else-0000")
        await confirm(client, prepared)
        assert "rejected" == (await status(client, prepared))["status"]
    assert [] == send_requests(graph)


async def test_a_smtp_preparation_is_never_sent_through_graph(
    graph: GraphRig, services: Services
) -> None:
    env = graph.env()
    imap_env = {**services.product_env, "SEND_LEDGER_NAMESPACE": env["SEND_LEDGER_NAMESPACE"]}
    imap_env.update(MAIL_ENABLE_SEND="1")
    async with mcp_client(imap_env) as (client, _):
        prepared = await prepare(client)
    async with mcp_client(env) as (client, _):
        failed, body = await confirm(client, prepared)
        assert failed and "integrity" in str(body), body
    assert [] == send_requests(graph)


async def ledger_evidence(graph: GraphRig, env: dict[str, str], pid: str) -> tuple[int, str]:
    """`angelos ledger evidence PID` as the operator runs it, in a subprocess that reaches the
    doubles through the pinned hosts."""
    code, out, err = await run_pinned(
        graph.services, graph.routes(), env, "ledger", "evidence", pid, "--by", "graph-test"
    )
    return code, out + err


async def test_the_operator_settles_an_unknown_send_by_its_sent_items_copy(graph: GraphRig) -> None:
    graph.double.inject("POST", "/me/sendMail", ApplyThenStatus(502, "BadGateway"))
    env = graph.env()
    async with mcp_client(env) as (client, _):
        prepared = await prepare(client)
        await confirm(client, prepared)
        assert "unknown" == (await status(client, prepared))["status"]
    code, output = await ledger_evidence(graph, env, prepared["prepared_id"])
    assert 0 == code, output
    assert "Graph ID" in output and "recorded outcome_evidence by operator:graph-test" in output
    async with mcp_client(env) as (client, _):
        answer = await status(client, prepared)
    assert ("accepted", "sent_copy") == (answer["status"], answer.get("evidence")), answer
    assert 1 == len(send_requests(graph)) and 1 == len(graph.double.sent)
