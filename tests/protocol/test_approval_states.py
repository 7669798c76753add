"""The 2026-07-28 approval round trip driven by hand: the request state a client echoes.

`client.session.call_tool(..., allow_input_required=True)` hands back the raw
InputRequiredResult, so a test can keep, alter, replay or move the sealed `requestState`
instead of letting the SDK's driver retry at once. The SDK's request-state boundary refuses a
state it did not seal for this request and this caller (-32602); the gate refuses a sealed one
that is not the answer to the newest recorded request of the preparation (`approval_refused`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

import service.approval.gate as gate
from service.approval.channel import ANSWER_KEY
from support.approval import (
    SEND,
    accepting,
    answer,
    approval_env,
    confirm_args,
    error_code,
    kinds,
    ledger_events,
    prepare,
    principal,
    recipient,
    refusals,
    sends,
    shared_server,
    status,
)
from support.inprocess import mcp_client
from support.services import Services

ERA = "2026-07-28"
TOOL = "mail_send_confirmed"
SDK_LOG = "mcp.server.request_state"  # where the SDK logs why it refused a state


async def ask(client: Client, preview: dict[str, Any]) -> types.InputRequiredResult:
    """The first round: the server asks for approval instead of answering."""
    first = await client.session.call_tool(TOOL, confirm_args(preview), allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    assert first.request_state is not None and ANSWER_KEY in (first.input_requests or {})
    return first


async def retry(
    client: Client, preview: dict[str, Any], state: str | None, reply: types.ElicitResult
) -> types.CallToolResult | types.InputRequiredResult:
    """The retried call carrying an answer under our key and the given state."""
    return await client.session.call_tool(
        TOOL,
        confirm_args(preview),
        input_responses={ANSWER_KEY: reply},
        request_state=state,
        allow_input_required=True,
    )


def refused_as(result: object) -> str | None:
    """approval_declined's error code of a terminal result, or a description of what came."""
    if isinstance(result, types.CallToolResult):
        return error_code(result)
    return type(result).__name__


def tampered(state: str) -> str:
    """The state with one character in its middle changed (still URL-safe base64)."""
    middle = len(state) // 2
    return state[:middle] + ("B" if state[middle] == "A" else "A") + state[middle + 1 :]


class TestRequestState:
    async def test_a_tampered_state_is_refused_by_the_sdk_and_the_real_one_still_works(
        self, services: Services, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.WARNING, logger=SDK_LOG)
        rcpt = recipient()
        async with mcp_client(
            approval_env(services), mode=ERA, elicitation_callback=accepting()
        ) as (client, app):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            first = await ask(client, preview)
            assert first.request_state is not None
            with pytest.raises(MCPError) as refused:
                await retry(client, preview, tampered(first.request_state), answer("accept", SEND))
            between = await kinds(app, pid)
            sent = await retry(client, preview, first.request_state, answer("accept", SEND))
        assert (types.INVALID_PARAMS, "Invalid or expired requestState") == (
            refused.value.error.code,
            refused.value.error.message,
        )
        assert ["prepared", "approval_requested"] == between  # the gate never saw it
        assert "requestState rejected on tools/call: seal" in caplog.text
        assert refused_as(sent) is None and 1 == sends(services, rcpt)

    async def test_a_state_replayed_after_a_decline_is_refused(self, services: Services) -> None:
        rcpt = recipient()
        async with mcp_client(
            approval_env(services), mode=ERA, elicitation_callback=accepting()
        ) as (client, app):
            preview = await prepare(client, [rcpt])
            first = await ask(client, preview)
            declined = await retry(client, preview, first.request_state, answer("decline"))
            replayed = await retry(client, preview, first.request_state, answer("accept", SEND))
            after = await status(client, preview["prepared_id"])
            events = await ledger_events(app, preview["prepared_id"])
        assert ("approval_declined", "approval_declined") == (
            refused_as(declined),
            refused_as(replayed),
        )
        assert ["declined", "state_replayed"] == refusals(events)
        assert "approved" not in [kind for kind, _ in events] and 0 == sends(services, rcpt)
        assert ("prepared", "required") == (after["status"], after["approval"])

    async def test_a_state_of_an_earlier_request_is_refused_once_a_newer_one_exists(
        self, services: Services
    ) -> None:
        rcpt = recipient()
        async with mcp_client(
            approval_env(services), mode=ERA, elicitation_callback=accepting()
        ) as (client, app):
            preview = await prepare(client, [rcpt])
            older = await ask(client, preview)
            await ask(client, preview)  # a second request: only its answer may approve
            replayed = await retry(client, preview, older.request_state, answer("accept", SEND))
            events = await ledger_events(app, preview["prepared_id"])
            # The preparation stays usable: a fresh round through the SDK's driver sends it.
            sent = await client.call_tool(TOOL, confirm_args(preview))
        assert "approval_declined" == refused_as(replayed)
        assert ["state_replayed"] == refusals(events)
        assert 2 == [kind for kind, _ in events].count("approval_requested")
        assert "approved" not in [kind for kind, _ in events]
        assert error_code(sent) is None and 1 == sends(services, rcpt)

    async def test_a_stale_answer_never_uses_up_the_newer_request(self, services: Services) -> None:
        rcpt = recipient()
        async with mcp_client(
            approval_env(services), mode=ERA, elicitation_callback=accepting()
        ) as (client, app):
            preview = await prepare(client, [rcpt])
            older = await ask(client, preview)
            newer = await ask(client, preview)
            stale = await retry(client, preview, older.request_state, answer("accept", SEND))
            # The newest request's own answer still approves, on the same state.
            sent = await retry(client, preview, newer.request_state, answer("accept", SEND))
            events = await ledger_events(app, preview["prepared_id"])
        assert "approval_declined" == refused_as(stale)
        assert error_code(sent) is None and 1 == sends(services, rcpt)
        assert ["state_replayed"] == refusals(events)
        assert 1 == [kind for kind, _ in events].count("approved")

    async def test_a_preparation_asked_about_too_often_says_so_and_sends_nothing(
        self, services: Services
    ) -> None:
        rcpt = recipient()
        env = approval_env(services, SEND_ANNOTATION_CAP="4")  # two questions, two answers
        async with mcp_client(env, mode=ERA, elicitation_callback=accepting()) as (client, app):
            preview = await prepare(client, [rcpt])
            for _ in range(2):
                asked = await ask(client, preview)
                await retry(client, preview, asked.request_state, answer("decline", None))
            third = await client.call_tool(TOOL, confirm_args(preview))
            events = await ledger_events(app, preview["prepared_id"])
        assert "approval_unavailable" == error_code(third)
        assert "asked about too often" in (third.structured_content or {})["error"]
        assert ["declined", "declined"] == refusals(events)
        assert "approved" not in [kind for kind, _ in events] and 0 == sends(services, rcpt)

    async def test_a_state_minted_for_another_principal_is_refused_by_the_sdk(
        self, services: Services, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Two clients of ONE server (one sealing key): only the binding tells them apart."""
        caplog.set_level(logging.WARNING, logger=SDK_LOG)
        rcpt, person = recipient(), accepting()
        owners = {"owner-client": principal("tester"), "other-client": principal("mallory")}

        def principal_of(ctx: Any) -> Any:
            client_params = ctx.session.client_params
            assert client_params is not None
            return owners[client_params.client_info.name]

        async with shared_server(approval_env(services), principal_of) as (server, app):
            mine = types.Implementation(name="owner-client", version="1")
            theirs = types.Implementation(name="other-client", version="1")
            async with (
                Client(server, mode=ERA, client_info=mine, elicitation_callback=person) as owner,
                Client(server, mode=ERA, client_info=theirs, elicitation_callback=person) as other,
            ):
                preview = await prepare(owner, [rcpt])
                first = await ask(owner, preview)
                with pytest.raises(MCPError) as refused:
                    await retry(other, preview, first.request_state, answer("accept", SEND))
                types_after = await kinds(app, preview["prepared_id"])
                sent = await retry(owner, preview, first.request_state, answer("accept", SEND))
        assert (types.INVALID_PARAMS, "Invalid or expired requestState") == (
            refused.value.error.code,
            refused.value.error.message,
        )
        assert ["prepared", "approval_requested"] == types_after
        assert "requestState rejected on tools/call: principal" in caplog.text
        assert refused_as(sent) is None and 1 == sends(services, rcpt)

    async def test_an_answer_after_the_ledger_side_expiry_is_refused(
        self, services: Services, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The gate's own bound on a request's age (STATE_TTL_MS, 600 s) is what is tested.

        The SDK's sealed state carries its own 600 s expiry, fixed when the server is built, so
        shrinking the gate's constant alone lets a still-valid state reach the gate after the
        recorded request has aged past its bound, without waiting ten minutes.
        """
        rcpt = recipient()
        monkeypatch.setattr(gate, "STATE_TTL_MS", 5)
        async with mcp_client(
            approval_env(services), mode=ERA, elicitation_callback=accepting()
        ) as (client, app):
            preview = await prepare(client, [rcpt])
            first = await ask(client, preview)
            await asyncio.sleep(0.02)
            late = await retry(client, preview, first.request_state, answer("accept", SEND))
            events = await ledger_events(app, preview["prepared_id"])
        assert "approval_declined" == refused_as(late)
        assert ["state_expired"] == refusals(events)
        assert "approved" not in [kind for kind, _ in events] and 0 == sends(services, rcpt)

    async def test_an_answer_without_a_state_is_a_fresh_request(self, services: Services) -> None:
        rcpt = recipient()
        async with mcp_client(
            approval_env(services), mode=ERA, elicitation_callback=accepting()
        ) as (client, app):
            preview = await prepare(client, [rcpt])
            unasked = await retry(client, preview, None, answer("accept", SEND))
            types_after = await kinds(app, preview["prepared_id"])
        assert isinstance(unasked, types.InputRequiredResult)  # asked again, not approved
        assert ["prepared", "approval_requested"] == types_after
        assert 0 == sends(services, rcpt)
