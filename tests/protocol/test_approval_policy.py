"""The owner's send policy through MCP: the recipient allowlist and the send rate limit.

Approval is off here, so what is refused is refused by the policy alone. Checked in the SMTP
sink's spool, the ledger stream and send_status (nothing consumed), and in every log line
and error text (an address the allowlist refuses is never written anywhere).
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from schemas.ledger import decode_event
from support.approval import (
    approval_env,
    confirm,
    error_code,
    kinds,
    prepare,
    recipient,
    sends,
    status,
)
from support.inprocess import mcp_client
from support.services import Services


async def refused_confirms(app: Any, pid: str) -> list[str]:
    """The reasons of the confirm_refused annotations (written in the background) on `pid`."""
    store = app.sending.store
    for _ in range(50):
        _, entries = await store.read(pid)
        reasons = [e.t for e in entries if e.t == "confirm_refused"]
        if reasons:
            break
        await asyncio.sleep(0.05)
    return [decode_event(e.e).data.reason for e in entries if e.t == "confirm_refused"]


STRANGER = "Stranger.Zq7@elsewhere-zq7.test"  # "zq7" appears nowhere else


async def prepare_with_cc(client: Any, to: str, cc: str) -> Any:
    message = {"to": [to], "cc": [cc], "subject": "Plan", "text": "Hello"}
    return await client.call_tool("mail_prepare", {"action": "new", "message": message})


class TestCapabilities:
    async def test_the_policy_is_shown_from_the_real_server_but_never_the_entries(
        self, services: Services
    ) -> None:
        base = approval_env(services, "off")
        shown = {
            **base,
            "ANGELOS_SEND_APPROVAL": "elicitation",
            "MAIL_SEND_ALLOWED_RECIPIENTS": f"{STRANGER}, @hidden-zq7.test",
            "MAIL_SEND_RATE_LIMIT": "20/h",
        }
        bodies = []
        for env in (base, {**base, "ANGELOS_SEND_APPROVAL": "off"}, shown):
            async with mcp_client(env) as (client, _):
                result = await client.call_tool("mail_query", {"action": "capabilities"})
            bodies.append(result.structured_content or {})
        fields = {"send_approval", "send_rate_limit", "recipient_allowlist"}
        assert not fields & set(bodies[0]) and not fields & set(bodies[1])
        assert ("elicitation", "20/h", True) == tuple(
            bodies[2][name] for name in ("send_approval", "send_rate_limit", "recipient_allowlist")
        )
        assert "zq7" not in json.dumps(bodies[2]).lower()


class TestAllowlist:
    async def test_an_off_list_address_is_refused_and_never_written(
        self,
        services: Services,
        capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        caplog.set_level(logging.DEBUG)
        allowed = recipient("ok")
        env = approval_env(
            services, "off", MAIL_SEND_ALLOWED_RECIPIENTS=f"{allowed}, @example.test"
        )
        with structlog.testing.capture_logs() as logged:
            async with mcp_client(env) as (client, _):
                capabilities = await client.call_tool("mail_query", {"action": "capabilities"})
                refused = await prepare_with_cc(client, allowed, STRANGER)
        body = refused.structured_content or {}
        assert "recipient_not_allowed" == error_code(refused)
        assert "cc[0]" in body["error"] and "nothing was prepared" in body["error"]
        assert "tool_call" in {event["event"] for event in logged}  # the capture saw the call
        out, err = capsys.readouterr()
        written = "\n".join(
            [
                json.dumps(body),
                *(c.text for c in refused.content if hasattr(c, "text")),
                json.dumps(logged, default=str),
                caplog.text,
                out,
                err,
            ]
        ).lower()
        assert "zq7" not in written  # neither the address nor its domain, in any case
        assert True is (capabilities.structured_content or {})["recipient_allowlist"]
        assert 0 == sends(services, allowed)

    async def test_only_the_off_list_recipient_is_named(self, services: Services) -> None:
        allowed = recipient("ok")
        env = approval_env(services, "off", MAIL_SEND_ALLOWED_RECIPIENTS="@example.test")
        async with mcp_client(env) as (client, _):
            refused = await prepare_with_cc(client, allowed, STRANGER)
        body = refused.structured_content or {}
        assert "not on the recipient allowlist: cc[0]; nothing was prepared" == body["error"]

    async def test_a_narrowed_list_refuses_at_confirm_without_consuming(
        self, services: Services
    ) -> None:
        rcpt = recipient("wide")
        base = approval_env(services, "off")
        wide = {**base, "MAIL_SEND_ALLOWED_RECIPIENTS": "@example.test"}
        narrow = {**base, "MAIL_SEND_ALLOWED_RECIPIENTS": "someone-else@example.test"}
        async with mcp_client(wide) as (client, _):
            preview = await prepare(client, [rcpt])
        pid = preview["prepared_id"]
        async with mcp_client(narrow) as (client, app):
            refused = await confirm(client, preview)
            between = await status(client, pid)
            reasons = await refused_confirms(app, pid)
            types_between = await kinds(app, pid)
        body = refused.structured_content or {}
        assert "recipient_not_allowed" == error_code(refused)
        assert "not on the current recipient allowlist: to[0]" in body["error"]
        assert rcpt not in json.dumps(body)
        assert "prepared" == between["status"] and "approval" not in between
        assert ["recipient_not_allowed"] == reasons
        assert "claimed" not in types_between and 0 == sends(services, rcpt)
        async with mcp_client(wide) as (client, _):
            sent = await confirm(client, preview)
            again = await confirm(client, preview)
        assert error_code(sent) is None and "accepted" == (sent.structured_content or {})["status"]
        assert (sent.structured_content or {})["message_id"] == preview["message_id"]
        assert False is (again.structured_content or {})["resent"]
        assert 1 == sends(services, rcpt)


class TestRateLimit:
    async def test_the_third_send_in_a_minute_waits_and_nothing_is_consumed(
        self, services: Services
    ) -> None:
        rcpts = [recipient("rate") for _ in range(3)]
        env = approval_env(services, "off", MAIL_SEND_RATE_LIMIT="2/m")
        async with mcp_client(env) as (client, app):
            capabilities = await client.call_tool("mail_query", {"action": "capabilities"})
            previews = [await prepare(client, [rcpt]) for rcpt in rcpts]
            answers = [await confirm(client, preview) for preview in previews]
            third = previews[2]["prepared_id"]
            after = await status(client, third)
            store = app.sending.store
            assert store is not None
            _, first_entries = await store.read(previews[0]["prepared_id"])
            types_third = await kinds(app, third)
            reasons = await refused_confirms(app, third)
        assert "2/m" == (capabilities.structured_content or {})["send_rate_limit"]
        assert [None, None, "rate_limited"] == [error_code(a) for a in answers]
        (claimed_ms,) = [e.srv_ms for e in first_entries if e.t == "claimed"]
        retry_at = datetime.fromtimestamp((claimed_ms + 60_000) / 1000, UTC)
        outcome = (answers[2].structured_content or {})["outcome"]
        assert {"status": "not_sent", "retry_at": retry_at.isoformat(timespec="seconds")} == (
            outcome
        )
        assert "prepared" == after["status"]
        assert "claimed" not in types_third and ["rate_limited"] == reasons
        assert [1, 1, 0] == [sends(services, rcpt) for rcpt in rcpts]
