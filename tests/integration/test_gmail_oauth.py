"""Gmail (google_oauth2) and Outlook (microsoft_oauth2) deployments end to end on the XOAUTH2 rig.

Everything crosses a real wire: the MCP client is in process, but the token endpoint is an HTTPS
server on loopback, IMAP is the Gmail-shaped Dovecot that validates the JWT access tokens itself,
and SMTP is the XOAUTH2 sink that files its own Sent copies. The pinned names (imap.gmail.com,
smtp.gmail.com, oauth2.googleapis.com, outlook.office365.com, smtp.office365.com,
login.microsoftonline.com) reach them through the test seam alone; the deployments are
configured exactly as an owner would configure them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from providers.netsafety import reroute_for_tests
from providers.oauth2.profiles import OUTLOOK_IMAP_SCOPE, OUTLOOK_SMTP_SCOPE
from support.inprocess import ALL_SCOPES, mcp_client
from support.pinned_process import run_pinned
from support.rig_mailbox import SENT_MAIL, copies_in, rig_imap
from support.services import MAILBOX_VARS, Services, XOAuth2Rig
from support.smtp_sink import transactions
from support.token_endpoint import Behaviour, TokenEndpoint, TokenRequest, token_endpoint
from support.xoauth2_tokens import RigMinter

pytestmark = pytest.mark.services

GOOGLE_CLIENT_ID = "1234-rig.apps.googleusercontent.com"
MS_CLIENT_ID = "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"
PLAN_ID = "<offsite-plan.202602031015@example.org>"


@pytest_asyncio.fixture
async def endpoint(services: Services, rig: XOAuth2Rig) -> AsyncIterator[TokenEndpoint]:
    """The token endpoint, minting JWTs the rig accepts, with the mail hosts rerouted too."""
    minter = RigMinter(rig)
    async with token_endpoint(services.dir / "tls", services.ca_file) as server:
        server.mint = lambda _request: minter.valid(600)
        reroute_for_tests(
            {
                ("imap.gmail.com", 993): ("127.0.0.1", rig.imap_port),
                ("smtp.gmail.com", 465): ("127.0.0.1", rig.smtp_port),
                ("outlook.office365.com", 993): ("127.0.0.1", rig.imap_port),
                ("smtp.office365.com", 587): ("127.0.0.1", rig.smtp_starttls_port),
            },
            str(services.ca_file),
        )
        yield server  # token_endpoint clears every reroute on the way out


def deployment(services: Services, rig: XOAuth2Rig, provider: str, **extra: str) -> dict[str, str]:
    """An owner's gmail or outlook configuration (a refresh token of its own: no shared cache)."""
    base = {k: v for k, v in services.product_env.items() if k not in MAILBOX_VARS}
    grant = f"1//rig-{uuid.uuid4().hex}"
    if provider == "gmail":
        login = {
            "GOOGLE_CLIENT_ID": GOOGLE_CLIENT_ID,
            "GOOGLE_CLIENT_SECRET": "GOCSPX-rig-secret",
            "GOOGLE_REFRESH_TOKEN": grant,
        }
    else:
        login = {
            "MICROSOFT_CLIENT_ID": MS_CLIENT_ID,
            "MICROSOFT_TENANT_ID": "consumers",
            "MICROSOFT_REFRESH_TOKEN": grant,
        }
    return {
        **base,
        "MAIL_PROVIDER": provider,
        "MAIL_USERNAME": rig.user,
        "MAIL_ENABLE_WRITES": "1",
        "MAIL_ENABLE_SEND": "1",
        "MAIL_ENABLE_DELETE": "1",
        "SEND_LEDGER_NAMESPACE": f"gm{uuid.uuid4().hex[:12]}",
        **login,
        **extra,
    }


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), result.structured_content


async def ok(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    failed, body = await call(client, tool, arguments)
    assert not failed, body
    return body


def refreshes(endpoint: TokenEndpoint) -> list[TokenRequest]:
    return [r for r in endpoint.requests if r.form.get("grant_type") == ["refresh_token"]]


async def test_gmail_capabilities_folders_and_labels(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    """Gmail semantics from a real XOAUTH2 login: labels as folders, All Mail never Archive."""
    async with mcp_client(deployment(services, rig, "gmail")) as (client, _):
        caps = await ok(client, "mail_query", {"action": "capabilities"})
        server = caps["server"]
        assert server["gmail_labels"] is True and server["permanent_delete"] is False
        assert server["special_folders"]["all"] == ["[Gmail]/All Mail"]
        assert server["special_folders"]["sent"] == [SENT_MAIL]
        assert "archive" not in server["special_folders"]
        assert caps["smtp_stores_sent"] is True
        assert caps["permanent_delete_enabled"] is False  # every gate on, still never on Gmail
        assert "permanent_delete_restriction" in caps
        # One message, a reference in each label it carries.
        found = []
        for folder in ("INBOX", "Work", "[Gmail]/All Mail"):
            page = await ok(
                client,
                "mail_query",
                {"action": "search", "search": {"folder": folder, "message_id": PLAN_ID}},
            )
            [message] = page["messages"]
            found.append((page["folder"], page["uid_validity"], message["uid"]))
        assert len(set(found)) == 3
    [request] = refreshes(endpoint)  # several IMAP logins, one refresh
    assert request.form["client_id"] == [GOOGLE_CLIENT_ID]


async def test_gmail_refuses_permanent_deletion_before_the_server(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    async with mcp_client(deployment(services, rig, "gmail")) as (client, _):
        page = await ok(
            client,
            "mail_query",
            {"action": "search", "search": {"folder": "Work", "message_id": PLAN_ID}},
        )
        [message] = page["messages"]
        ref = {"folder": "Work", "uid_validity": page["uid_validity"], "uid": message["uid"]}
        failed, body = await call(client, "mail_delete_permanently", ref)
        assert failed and body["error_code"] == "unsupported_operation", body
        again = await ok(
            client,
            "mail_query",
            {"action": "search", "search": {"folder": "Work", "message_id": PLAN_ID}},
        )
        assert [m["uid"] for m in again["messages"]] == [message["uid"]]


async def prepare(client: Any, to: str) -> dict[str, Any]:
    message = {"to": [to], "subject": "Rig", "text": "Hello over XOAUTH2"}
    return await ok(client, "mail_prepare", {"action": "new", "message": message})


async def confirm(client: Any, prepared: dict[str, Any], append_sent: bool) -> tuple[bool, Any]:
    return await call(
        client,
        "mail_send_confirmed",
        {
            "prepared_id": prepared["prepared_id"],
            "confirmed_digest": prepared["digest"],
            "append_sent": append_sent,
        },
    )


async def status(client: Any, prepared: dict[str, Any]) -> dict[str, Any]:
    return await ok(
        client, "mail_query", {"action": "send_status", "prepared_id": prepared["prepared_id"]}
    )


async def test_gmail_sends_once_and_files_its_own_sent_copy(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    """append_sent true is refused before the claim; false sends exactly once, Gmail files it."""
    to = f"gm-{uuid.uuid4().hex[:10]}@example.test"
    scopes = ("mail.read", "mail.send")  # no mail.write: a plain Gmail send needs none
    async with mcp_client(deployment(services, rig, "gmail"), scopes=scopes) as (client, _):
        prepared = await prepare(client, to)
        failed, body = await confirm(client, prepared, append_sent=True)
        assert failed and "append_sent=false" in body["error"], body
        assert "no message was sent" in body["error"]
        assert (await status(client, prepared))["status"] == "prepared"  # still usable
        failed, body = await confirm(client, prepared, append_sent=False)
        assert not failed and body["status"] == "accepted", body
        assert (await status(client, prepared))["status"] == "accepted"
    assert [t.outcome for t in transactions(rig.smtp_spool, rcpt=to)] == ["accepted"]
    async with rig_imap(services, rig) as imap:
        [copy] = await copies_in(imap, SENT_MAIL, prepared["message_id"])
    assert b"Hello over XOAUTH2" in copy


async def test_a_revoked_refresh_token_fails_closed_naming_the_fix(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    endpoint.behaviour = Behaviour.REVOKED
    async with mcp_client(deployment(services, rig, "gmail")) as (client, _):
        failed, body = await call(client, "mail_query", {"action": "folders"})
        assert failed and body["error_code"] == "service_unavailable", body
        assert "angelos google-auth" in body["error"]
        assert "GOOGLE_REFRESH_TOKEN" in body["error"]
        endpoint.behaviour = Behaviour.NORMAL  # the owner fixed the grant: no restart needed
        assert (await ok(client, "mail_query", {"action": "folders"}))["folders"]


async def test_a_token_refused_before_use_is_dropped_and_the_next_call_refreshes(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    """The endpoint's first token is already expired where it is checked: the login fails and
    says so; that generation is gone, so the next call gets a new token and works."""
    minter = RigMinter(rig)
    handed = iter([minter.expired()])
    endpoint.mint = lambda _request: next(handed, None) or minter.valid(600)
    async with mcp_client(deployment(services, rig, "gmail")) as (client, _):
        failed, body = await call(client, "mail_query", {"action": "folders"})
        assert failed and body["error_code"] == "service_unavailable", body
        assert "angelos google-auth" in body["error"]  # the fix is named
        assert (await ok(client, "mail_query", {"action": "folders"}))["folders"]
    assert len(refreshes(endpoint)) == 2


async def test_outlook_logs_in_and_sends_over_starttls(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    """The same machinery for Microsoft: v2 token endpoint with its scopes, STARTTLS on 587."""
    endpoint.scope = f"{OUTLOOK_IMAP_SCOPE} {OUTLOOK_SMTP_SCOPE}"
    to = f"ol-{uuid.uuid4().hex[:10]}@example.test"
    async with mcp_client(deployment(services, rig, "outlook"), scopes=ALL_SCOPES) as (client, _):
        caps = await ok(client, "mail_query", {"action": "capabilities"})
        assert caps["smtp_stores_sent"] is True
        prepared = await prepare(client, to)
        failed, body = await confirm(client, prepared, append_sent=True)
        assert failed and "no message was sent" in body["error"]
        failed, body = await confirm(client, prepared, append_sent=False)
        assert not failed and body["status"] == "accepted", body
    [request, *_] = refreshes(endpoint)
    assert request.path == "/consumers/oauth2/v2.0/token"
    assert request.form["scope"] == [f"{OUTLOOK_IMAP_SCOPE} {OUTLOOK_SMTP_SCOPE} offline_access"]
    assert [t.outcome for t in transactions(rig.smtp_spool, rcpt=to)] == ["accepted"]


async def ledger_evidence(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint, env: dict[str, str], pid: str
) -> tuple[int, str]:
    """`angelos ledger evidence PID` as the operator runs it, the pinned hosts rerouted by the
    test tree's launcher (a subprocess: its token requests reach this test's endpoint)."""
    routes = [("imap.gmail.com", 993, rig.imap_port), ("oauth2.googleapis.com", 443, endpoint.port)]
    code, out, err = await run_pinned(
        services, routes, env, "ledger", "evidence", pid, "--by", "rig-test"
    )
    return code, out + err


@pytest.mark.parametrize(("recipient", "found"), [("drop", True), ("vanish", False)])
async def test_an_unknown_gmail_send_is_settled_only_by_its_own_sent_copy(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint, recipient: str, found: bool
) -> None:
    """drop: Gmail filed the copy, then the reply was lost → evidence makes it accepted, the
    bytes identical. vanish: no copy → it stays unknown. Either way: one transaction, no resend."""
    to = f"{recipient}@{uuid.uuid4().hex[:10]}.example.test"
    env = deployment(services, rig, "gmail")
    async with mcp_client(env) as (client, _):
        prepared = await prepare(client, to)
        _, body = await confirm(client, prepared, append_sent=False)
        assert (await status(client, prepared))["status"] == "unknown", body
    code, output = await ledger_evidence(services, rig, endpoint, env, prepared["prepared_id"])
    async with mcp_client(env) as (client, _):
        answer = await status(client, prepared)
    if found:
        assert code == 0, output
        assert (answer["status"], answer["evidence"], answer["evidence_identical"]) == (
            "accepted",
            "sent_copy",
            True,
        )
    else:
        assert code == 1 and "Absence proves nothing" in output, output
        assert answer["status"] == "unknown" and "evidence" not in answer
    assert len(transactions(rig.smtp_spool, rcpt=to)) == 1


async def test_gmail_writes_labels_flags_moves_trash_and_drafts(
    services: Services, rig: XOAuth2Rig, endpoint: TokenEndpoint
) -> None:
    """The writing operations on Gmail's shape: a label is a folder, trash and drafts land in
    the [Gmail]/ folders named by their attributes (the fixture's own folders stay as they are)."""
    label, other = f"Label-{uuid.uuid4().hex[:8]}", f"Label-{uuid.uuid4().hex[:8]}"
    async with mcp_client(deployment(services, rig, "gmail")) as (client, _):
        for name in (label, other):
            assert (await ok(client, "mail_create", {"action": "folder", "name": name}))["created"]
        page = await ok(
            client,
            "mail_query",
            {"action": "search", "search": {"folder": "Work", "message_id": PLAN_ID}},
        )
        [message] = page["messages"]
        work = {"folder": "Work", "uid_validity": page["uid_validity"], "uid": message["uid"]}
        copied = await ok(
            client, "mail_create", {"action": "copy", "destination": label, "reference": work}
        )
        labelled = copied["destination"]
        assert labelled["folder"] == label
        await ok(
            client,
            "mail_modify",
            {"action": "flags", "operation": "add", "flags": ["\\Flagged"], "reference": labelled},
        )
        moved = await ok(
            client, "mail_modify", {"action": "move", "destination": other, "reference": labelled}
        )
        trashed = await ok(
            client, "mail_modify", {"action": "trash", "reference": moved["destination"]}
        )
        assert trashed["destination"]["folder"] == "[Gmail]/Trash"
        draft = {"to": ["bob@example.test"], "subject": "Rig draft", "text": "Not sent."}
        saved = await ok(client, "mail_create", {"action": "draft", "message": draft})
        assert saved["destination"]["folder"] == "[Gmail]/Drafts"
        still = await ok(
            client,
            "mail_query",
            {"action": "search", "search": {"folder": "Work", "message_id": PLAN_ID}},
        )
        assert [m["uid"] for m in still["messages"]] == [message["uid"]]
