"""mail_query capabilities and folders against the real Dovecot."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.imap_proxy import ImapProxy
from support.inprocess import ALL_SCOPES, mcp_client
from support.redis_control import ControlledRedis

ALL_GATES = {"MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_SEND": "1", "MAIL_ENABLE_DELETE": "1"}
READY = {"ready": True}
LOCAL_SEND = "mail.send is not in ANGELOS_LOCAL_SCOPES, which the operator sets"
NO_STORE = (
    "sending requires explicit server enablement and a durable send store: no durable send "
    "store is configured"
)
# A reference whose uid_validity matches no folder: a call that gets past the access rule is
# answered stale_reference by the mailbox and changes nothing.
NOWHERE = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
# One harmless call per operation class.
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "read": ("mail_query", {"action": "folders"}),
    "write": (
        "mail_modify",
        {"action": "flags", "reference": NOWHERE, "operation": "add", "flags": ["\\Seen"]},
    ),
    "delete": ("mail_delete_permanently", NOWHERE),
    "send": (
        "mail_send_confirmed",
        {"prepared_id": uuid.uuid4().hex, "confirmed_digest": "0" * 64, "append_sent": False},
    ),
    "send_status": ("mail_query", {"action": "send_status", "prepared_id": uuid.uuid4().hex}),
}
REFUSAL_CODES = {
    "scope": "insufficient_scope",
    "gate": "deployment_disabled",
    "store": "deployment_disabled",
    "provider": "unsupported_operation",
}


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


class TestReadiness:
    async def test_send_gate_on_with_default_scopes_reports_send_blocked_by_the_scope(
        self, services: Any
    ) -> None:
        body = await capabilities({**services.product_env, "MAIL_ENABLE_SEND": "1"})
        assert body["send_enabled"] is True
        assert {
            "ready": False,
            "blocked_by": [{"kind": "scope", "reason": LOCAL_SEND, "scope": "mail.send"}],
        } == body["readiness"]["send"]

    async def test_prepare_refuses_with_the_scope_capabilities_reported(
        self, services: Any
    ) -> None:
        env = {**services.product_env, "MAIL_ENABLE_SEND": "1"}
        async with mcp_client(env, ("mail.read",)) as (client, _):
            result = await client.call_tool(
                "mail_prepare", {"action": "new", "message": {"to": ["pat@example.test"]}}
            )
        body = result.structured_content
        assert result.is_error is True and body is not None
        assert ("insufficient_scope", "mail.send") == (body["error_code"], body["required_scope"])
        assert f"insufficient OAuth scope ({LOCAL_SEND})" == body["error"]

    async def test_every_class_is_ready_with_every_gate_scope_and_the_store(
        self, services: Any
    ) -> None:
        body = await capabilities({**services.product_env, **ALL_GATES}, ALL_SCOPES)
        assert {
            "read": READY,
            "write": READY,
            "delete": READY,
            "send": READY,
            "send_status": READY,
        } == body["readiness"]

    async def test_without_a_store_send_and_send_status_name_the_store(self, services: Any) -> None:
        env = {**services.product_env, **ALL_GATES, "ANGELOS_REDIS_URL": "off"}
        body = await capabilities(env, ALL_SCOPES)
        readiness = body["readiness"]
        assert (READY, READY, READY) == (
            readiness["read"],
            readiness["write"],
            readiness["delete"],
        )
        assert {"ready": False, "blocked_by": [{"kind": "store", "reason": NO_STORE}]} == (
            readiness["send"]
        )
        assert ["store"] == [b["kind"] for b in readiness["send_status"]["blocked_by"]]
        assert NO_STORE == body["send_disabled_reason"]

    async def test_gates_off_name_each_variable_in_check_order(self, services: Any) -> None:
        body = await capabilities(services.product_env, ALL_SCOPES)
        variables = {
            op: [b.get("variable") for b in body["readiness"][op].get("blocked_by", [])]
            for op in ("write", "delete", "send")
        }
        assert {
            "write": ["MAIL_ENABLE_WRITES"],
            "delete": ["MAIL_ENABLE_WRITES", "MAIL_ENABLE_DELETE"],
            "send": ["MAIL_ENABLE_SEND"],
        } == variables

    @pytest.mark.parametrize(
        ("env", "scopes"),
        [
            ({"MAIL_ENABLE_SEND": "1"}, ("mail.read",)),
            (ALL_GATES, ALL_SCOPES),
            ({**ALL_GATES, "ANGELOS_REDIS_URL": "off"}, ALL_SCOPES),
            ({}, ("mail.read", "mail.write")),
        ],
        ids=["send-gate-default-scopes", "all-ready", "no-store", "gates-off"],
    )
    async def test_every_call_answers_what_capabilities_reported_for_its_class(
        self, services: Any, env: dict[str, str], scopes: tuple[str, ...]
    ) -> None:
        async with mcp_client({**services.product_env, **env}, scopes) as (client, _):
            reported = await client.call_tool("mail_query", {"action": "capabilities"})
            readiness = reported.structured_content["readiness"]
            refused = {}
            for op, (tool, arguments) in PROBES.items():
                result = await client.call_tool(tool, arguments)
                code = (result.structured_content or {}).get("error_code")
                refused[op] = code if result.is_error and code in REFUSAL_CODES.values() else None
        expected = {
            op: None if verdict["ready"] else REFUSAL_CODES[verdict["blocked_by"][0]["kind"]]
            for op, verdict in readiness.items()
        }
        assert expected == refused

    async def test_without_uidplus_delete_is_blocked_by_the_provider_as_a_call_finds(
        self, services: Any
    ) -> None:
        async with ImapProxy(services, hide_capabilities=["UIDPLUS"]) as proxy:
            env = {**services.product_env, **ALL_GATES, "IMAP_PORT": str(proxy.port)}
            async with mcp_client(env, ALL_SCOPES) as (client, _):
                reported = await client.call_tool("mail_query", {"action": "capabilities"})
                result = await client.call_tool(*PROBES["delete"])
        blocked_by = reported.structured_content["readiness"]["delete"]["blocked_by"]
        assert ["provider"] == [b["kind"] for b in blocked_by]
        assert "unsupported_operation" == result.structured_content["error_code"]


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


class TestAStoreFixedWhileServing:
    async def test_a_server_started_on_a_store_without_aof_sends_once_aof_is_on(
        self, services: Any, tmp_path: Path
    ) -> None:
        redis = ControlledRedis(tmp_path)
        redis.start()
        try:
            redis.config_set("appendonly", "no")
            env = {
                **services.product_env,
                **ALL_GATES,
                "ANGELOS_REDIS_URL": redis.url,
                "SEND_LEDGER_NAMESPACE": f"fix-{uuid.uuid4().hex[:10]}",
                "ANGELOS_ALLOW_FAULT_INJECTION": "1",
                "ANGELOS_ENV": "test",
                "SEND_DISPATCHER_LEASE_MS": "1000",
                "SEND_DISPATCHER_LEASE_REFRESH_MS": "200",
                "SMTP_DATA_TERMINATION_TIMEOUT_S": "2",
                "SEND_DISPATCH_DEADLINE_S": "6",
                "SEND_RECOVERY_GRACE_S": "68",
            }
            async with mcp_client(env, ALL_SCOPES) as (client, _):
                before = await client.call_tool("mail_query", {"action": "capabilities"})
                redis.config_set("appendonly", "yes")
                after: dict[str, Any] = {}
                for _ in range(50):  # the next lease refresh reads the store again
                    answer = await client.call_tool("mail_query", {"action": "capabilities"})
                    after = answer.structured_content
                    if after["send_enabled"]:
                        break
                    await asyncio.sleep(0.1)
        finally:
            redis.stop()
        assert False is before.structured_content["send_enabled"]
        assert "appendonly yes" in before.structured_content["send_disabled_reason"]
        assert (True, None) == (after["send_enabled"], after.get("send_disabled_reason"))
