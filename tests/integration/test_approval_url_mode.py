"""URL-mode approval end to end: the 2026-07-28 client is sent to the passkey page and retries.

ANGELOS_SEND_APPROVAL=passkey on the real HTTP service (support/approval_stack.py: TLS, the
ledger in the test Redis, the SMTP sink, the owner in headless Chromium with a CDP virtual
authenticator). The MCP SDK client speaks 2026-07-28 over /mcp with a first-party bearer token;
mail_send_confirmed answers InputRequiredResult with an ElicitRequestURLParams naming the
page, the client's elicitation callback plays the person, and the SDK's driver retries the call
by itself. One stack and one browser serve the module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from schemas.ledger_events import ApprovalRefused, ApprovalRequested, Approved
from support.approval import confirm, error_code, recipient, status
from support.approval_stack import ApprovalStack, approval_stack, settle
from support.browser import Page
from support.services import Services
from support.smtp_sink import transactions

pytestmark = [pytest.mark.services, pytest.mark.asyncio(loop_scope="module")]
CLIENT = types.Implementation(name="url-mode-tests", version="1.0.0")


@dataclass
class Owner:
    stack: ApprovalStack
    page: Page


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def owner(
    services: Services, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Owner]:
    async with (
        approval_stack(services, tmp_path_factory.mktemp("url-mode")) as s,
        s.owner_browser() as page,
    ):
        yield Owner(s, page)


@dataclass
class Person:
    """The elicitation callback: checks the URL it is sent to, visits it or not, answers."""

    owner: Owner
    action: str  # "accept" or "decline"
    visit: bool  # approve on the page before answering
    expected_url: str = ""
    shown: list[types.ElicitRequestParams] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.shown.append(params)
        assert isinstance(params, types.ElicitRequestURLParams), params
        assert self.expected_url == params.url
        if self.visit:
            await self.approve_at(params.url)
        return types.ElicitResult(action=self.action)  # type: ignore[arg-type]

    async def approve_at(self, url: str) -> None:
        s, page = self.owner.stack, self.owner.page
        await page.goto(url)
        if await page.evaluate("!!document.getElementById('bootstrap-token')"):
            await s.sign_in_at(page, url)  # the module's first visit: enrol and sign in
        async with page.navigation():  # approved, the page shows the preparation again
            await page.click("#approve")
        await settle(page, "document.getElementById('refusal')")
        assert "approved" == await page.evaluate(
            "document.getElementById('refusal').dataset.reason"
        )


@dataclass
class Outcome:
    preview: dict[str, Any]
    result: types.CallToolResult
    after: dict[str, Any]
    events: list[Any]


async def send_through(owner: Owner, person: Person, to: str) -> Outcome:
    """Prepare over /mcp, confirm through the SDK's input-required driver, read what happened."""
    s = owner.stack
    token = await s.token()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, verify=s.ssl, trust_env=False, timeout=60
    )
    transport = streamable_http_client(f"{s.issuer}/mcp", http_client=http)
    async with (
        http,
        Client(
            transport, mode="2026-07-28", elicitation_callback=person, client_info=CLIENT
        ) as client,
    ):
        made = await client.call_tool(
            "mail_prepare",
            {"action": "new", "message": {"to": [to], "subject": "Plan", "text": "Hello"}},
        )
        assert made.is_error is False, made.structured_content
        preview: dict[str, Any] = made.structured_content or {}
        person.expected_url = f"{s.issuer}/oauth/approve/{preview['prepared_id']}"
        assert person.expected_url == preview["approval_url"]
        result = await confirm(client, preview)
        after = await status(client, preview["prepared_id"])
    return Outcome(preview, result, after, await s.events(preview["prepared_id"]))


def of_type(events: list[Any], kind: str) -> list[Any]:
    return [e.data for e in events if e.type == kind]


async def test_the_client_is_sent_to_the_passkey_page_and_its_retry_sends_once(
    services: Services, owner: Owner
) -> None:
    to = recipient("url")
    person = Person(owner, "accept", visit=True)
    got = await send_through(owner, person, to)
    assert 1 == len(person.shown)
    assert got.result.is_error is False, got.result.structured_content
    assert "accepted" == (got.result.structured_content or {})["status"]
    assert 1 == len(transactions(services.smtp_spool, rcpt=to))
    [requested] = of_type(got.events, "approval_requested")
    assert isinstance(requested, ApprovalRequested) and "passkey" == requested.mode
    [approved] = of_type(got.events, "approved")
    assert isinstance(approved, Approved) and "passkey" == approved.mode
    assert isinstance(approved.credential_sha256, str) and 64 == len(approved.credential_sha256)
    assert 1 == len(of_type(got.events, "claimed"))
    assert [] == of_type(got.events, "approval_refused")
    assert ("accepted", "passkey") == (got.after["status"], got.after["approval"])


async def test_an_accept_without_the_page_or_a_decline_sends_nothing(
    services: Services, owner: Owner
) -> None:
    unvisited_to, declined_to = recipient("skip"), recipient("no")
    unvisited = await send_through(owner, Person(owner, "accept", visit=False), unvisited_to)
    declined = await send_through(owner, Person(owner, "decline", visit=False), declined_to)
    assert "approval_unavailable" == error_code(unvisited.result)
    assert "approval_declined" == error_code(declined.result)
    for got, to in ((unvisited, unvisited_to), (declined, declined_to)):
        assert [] == transactions(services.smtp_spool, rcpt=to)
        assert [] == of_type(got.events, "approved") == of_type(got.events, "claimed")
        assert ("prepared", "required") == (got.after["status"], got.after["approval"])
        [requested] = of_type(got.events, "approval_requested")
        assert "passkey" == requested.mode
    assert [] == of_type(unvisited.events, "approval_refused")
    missing = [d.reason for d in of_type(unvisited.events, "confirm_refused")]
    assert ["approval_missing"] == missing  # the claim found no approved event
    [refused] = of_type(declined.events, "approval_refused")
    [requested] = of_type(declined.events, "approval_requested")
    assert (
        ApprovalRefused(mode="passkey", reason="declined", nonce_sha256=requested.nonce_sha256)
        == refused
    )
