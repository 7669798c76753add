"""mail_query capabilities and folders against the real Dovecot (tools.md §19.2)."""

from __future__ import annotations

from typing import Any

import pytest

from support.inprocess import mcp_client

ALL_GATES = {"MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_SEND": "1", "MAIL_ENABLE_DELETE": "1"}


async def capabilities(env: dict[str, str], scopes: tuple[str, ...] = ("mail.read",)) -> Any:
    async with mcp_client(env, scopes) as (client, _):
        result = await client.call_tool("mail_query", {"action": "capabilities"})
    assert result.is_error is False
    return result.structured_content


class TestCapabilities:
    async def test_dovecot_with_every_gate_on(self, services: Any) -> None:
        body = await capabilities({**services.product_env, **ALL_GATES})
        server = body["server"]
        assert (True, True, True, True) == (
            server["move"],
            server["uid_expunge"],
            server["condstore"],
            server["special_use"],
        )
        assert ["Trash"] == server["special_folders"]["trash"]
        assert ["Drafts"] == server["special_folders"]["drafts"]
        assert ["Sent"] == server["special_folders"]["sent"]
        assert server["gmail_labels"] is False and server["permanent_delete"] is True
        assert server["imap"] == sorted(server["imap"]) and "MOVE" in server["imap"]
        assert body["mailbox_writes_enabled"] is True
        assert body["permanent_delete_enabled"] is True
        assert body["send_enabled"] is True
        assert body["smtp_stores_sent"] is False
        assert body["filters"] and body["content_trust"]
        assert "permanent_delete_restriction" not in body

    @pytest.mark.parametrize(
        ("gates", "writes", "delete"),
        [
            ({"MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_DELETE": "0"}, True, False),
            ({"MAIL_ENABLE_WRITES": "0", "MAIL_ENABLE_DELETE": "1"}, False, False),
            ({"MAIL_ENABLE_WRITES": "true", "MAIL_ENABLE_DELETE": "yes"}, False, False),
        ],
    )
    async def test_gates_decide_the_effective_flags(
        self, services: Any, gates: dict[str, str], writes: bool, delete: bool
    ) -> None:
        body = await capabilities({**services.product_env, **gates})
        assert (writes, delete) == (
            body["mailbox_writes_enabled"],
            body["permanent_delete_enabled"],
        )

    async def test_without_a_store_sending_is_disabled(self, services: Any) -> None:
        env = {**services.product_env, **ALL_GATES, "ANGELOS_REDIS_URL": "off"}
        body = await capabilities(env)
        assert body["send_enabled"] is False

    async def test_send_gate_values_other_than_1_keep_sending_off(self, services: Any) -> None:
        for value in ("", "true", "yes", "0"):
            body = await capabilities({**services.product_env, "MAIL_ENABLE_SEND": value})
            assert body["send_enabled"] is False


class TestFolders:
    async def test_folders_carry_delimiter_and_role_attributes(self, services: Any) -> None:
        async with mcp_client(services.product_env, ("mail.read",)) as (client, _):
            result = await client.call_tool("mail_query", {"action": "folders"})
        folders = {f["name"]: f for f in result.structured_content["folders"]}
        assert {"INBOX", "Drafts", "Sent", "Trash", "Archive"} <= set(folders)
        assert "\\Drafts" in folders["Drafts"]["attributes"]
        assert all(isinstance(f["delimiter"], str) for f in folders.values())
        assert all(isinstance(f["attributes"], list) for f in folders.values())

    async def test_an_unreachable_mailbox_is_service_unavailable(self, services: Any) -> None:
        env = {**services.product_env, "IMAP_PORT": "1"}
        async with mcp_client(env, ("mail.read",)) as (client, _):
            result = await client.call_tool("mail_query", {"action": "folders"})
        body = result.structured_content
        assert result.is_error is True
        assert "service_unavailable" == body["error_code"]
        assert services.password not in body["error"]


class TestMissingHandler:
    async def test_an_operation_without_a_handler_says_so_by_name(self, services: Any) -> None:
        from schemas.args.query import Draft

        async with mcp_client(services.product_env, ("mail.read",)) as (client, app):
            app.handlers.pop(Draft, None)
            result = await client.call_tool(
                "mail_query",
                {"action": "draft", "reference": {"folder": "Drafts", "uid_validity": 1, "uid": 1}},
            )
        body = result.structured_content
        assert result.is_error is True and body is not None
        assert "unsupported_operation" == body["error_code"]
        assert "mail_query action 'draft'" in body["error"]
