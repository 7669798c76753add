"""mail_delete_permanently's own checks run in their documented order, before any mailbox.

The application here has no mailbox at all: a call that got past every check would answer
service_unavailable ("the mailbox is not configured"), so any other code proves the refusal
came first. Microsoft Graph cannot be configured in this release, so its refusal is checked
on a configuration changed after loading.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from service.config import load_config
from service.context import AppContext
from service.operations import HANDLERS
from service.principal import local_principal
from service.tool_call import call_tool

BASE = {
    "MAIL_USERNAME": "owner@example.com",
    "MAIL_PASSWORD": "pw",
    "HOME": "/home/owner",
    "ANGELOS_REDIS_URL": "off",
}
CUSTOM = {
    **BASE,
    "MAIL_PROVIDER": "custom",
    "IMAP_HOST": "mail.example.com",
    "SMTP_HOST": "mail.example.com",
}
GMAIL = {**BASE, "MAIL_PROVIDER": "gmail", "MAIL_AUTH_MODE": "app_password"}
GATES = {"MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_DELETE": "1"}
REF = {"folder": "INBOX", "uid_validity": 7, "uid": 9}
WRITER = local_principal("owner", ("mail.read", "mail.write"))


def app_for(env: dict[str, str], provider: str | None = None) -> AppContext:
    config = load_config(env)
    assert config.mail is not None, config.problems
    if provider is not None:
        config = msgspec.structs.replace(
            config, mail=msgspec.structs.replace(config.mail, provider=provider)
        )
    return AppContext(
        config=config,
        gates=config.gates,
        mailbox=None,
        smtp_stores_sent=False,
        handlers=dict(HANDLERS),
    )


async def delete(app: AppContext, arguments: Any = REF) -> dict[str, Any]:
    result = await call_tool(app, WRITER, "mail_delete_permanently", arguments)
    assert result.is_error
    return result.structured


class TestDeleteChecks:
    async def test_with_every_check_passed_the_call_would_reach_the_mailbox(self) -> None:
        body = await delete(app_for({**CUSTOM, **GATES}))
        assert "service_unavailable" == body["error_code"]

    async def test_microsoft_graph_is_unsupported_before_the_delete_gate(self) -> None:
        app = app_for({**CUSTOM, "MAIL_ENABLE_WRITES": "1"}, provider="microsoft")
        assert "unsupported_operation" == (await delete(app))["error_code"]

    @pytest.mark.parametrize("delete_gate", ["1", "0"])
    @pytest.mark.parametrize(
        "env", [GMAIL, {**CUSTOM, "IMAP_HOST": "imap.googlemail.com"}], ids=["preset", "host"]
    )
    async def test_gmail_is_unsupported_whatever_the_delete_gate(
        self, env: dict[str, str], delete_gate: str
    ) -> None:
        app = app_for({**env, "MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_DELETE": delete_gate})
        body = await delete(app)
        assert "unsupported_operation" == body["error_code"]
        assert "Gmail" in body["error"]
        assert "check_capabilities" == body["retry"]["action"]

    @pytest.mark.parametrize("value", ["0", "", "true", "yes"])
    async def test_the_delete_gate_opens_only_for_1(self, value: str) -> None:
        app = app_for({**CUSTOM, "MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_DELETE": value})
        body = await delete(app)
        assert "deployment_disabled" == body["error_code"]
        assert "permanent deletion is disabled" in body["error"]
        assert body["retry_safe"] is False

    async def test_the_writes_gate_comes_before_the_delete_gate(self) -> None:
        app = app_for({**CUSTOM, "MAIL_ENABLE_DELETE": "1"})
        body = await delete(app)
        assert "deployment_disabled" == body["error_code"]
        assert "mailbox writes are disabled" in body["error"]

    async def test_a_malformed_call_is_invalid_whatever_the_gates(self) -> None:
        app = app_for(CUSTOM)
        body = await delete(app, {**REF, "action": "x"})
        assert "invalid_arguments" == body["error_code"]

    async def test_a_graph_reference_is_invalid_for_an_imap_mailbox(self) -> None:
        ref = {"folder": "AAMk", "provider": "microsoft_graph", "account": "a", "id": "b"}
        body = await delete(app_for({**CUSTOM, **GATES}), ref)
        assert "invalid_arguments" == body["error_code"]
