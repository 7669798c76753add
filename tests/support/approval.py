"""Human approval of a send through real MCP clients: settings, calls, answers, ledger facts.

    async with mcp_client(approval_env(services), mode=era, elicitation_callback=person,
                          client_info=CLIENT) as (client, app):
        preview = await prepare(client, [rcpt])
        result = await confirm(client, preview)
        kinds = [kind for kind, _ in await ledger_events(app, preview["prepared_id"])]

`Person` is an elicitation callback that records what it was shown and answers as told;
`shared_server` serves one application to several in-process clients, each its own principal.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import msgspec
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.server import Server

from schemas.ledger import decode_event
from service.app import build_app
from service.config import load_config
from service.context import AppContext
from service.mcp_server import build_server
from service.principal import Principal, local_principal
from support.angelos_process import ROOT, angelos_command, clean_env
from support.inprocess import ALL_SCOPES
from support.services import Services
from support.smtp_sink import transactions

ERAS = ["legacy", "2026-07-28"]
VERSION_OF = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}  # what each era negotiates
CLIENT = types.Implementation(name="approval-tests", version="4.2.0")
SEND = {"decision": "send"}


def recipient(tag: str = "ap") -> str:
    """An address the SMTP sink has never seen."""
    return f"{tag}-{uuid.uuid4().hex[:10]}@example.test"


def approval_env(services: Services, approval: str = "elicitation", **extra: str) -> dict[str, str]:
    """Sending on, a fresh ledger namespace, the given approval mode and any other variables."""
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": f"t{uuid.uuid4().hex[:12]}",
        "ANGELOS_SEND_APPROVAL": approval,
        **extra,
    }


async def prepare(client: Client, to: list[str], **message: Any) -> dict[str, Any]:
    """A new preparation; its preview (asserted to be no error)."""
    result = await client.call_tool(
        "mail_prepare",
        {"action": "new", "message": {"to": to, "subject": "Plan", "text": "Hello", **message}},
    )
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content or {}
    return body


def confirm_args(preview: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "prepared_id": preview["prepared_id"],
        "confirmed_digest": preview["digest"],
        "append_sent": False,
    }


async def confirm(client: Client, preview: Mapping[str, Any]) -> types.CallToolResult:
    """mail_send_confirmed through the client's own input-required driver."""
    return await client.call_tool("mail_send_confirmed", confirm_args(preview))


async def status(client: Client, pid: str) -> dict[str, Any]:
    result = await client.call_tool("mail_query", {"action": "send_status", "prepared_id": pid})
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content or {}
    return body


def error_code(result: types.CallToolResult) -> str | None:
    """The error code of an error result, None for a success."""
    body = result.structured_content or {}
    return str(body["error_code"]) if result.is_error else None


async def ledger_events(app: AppContext, pid: str) -> list[tuple[str, Any]]:
    """The preparation's stream as (event type, decoded data), oldest first."""
    store = app.sending.store
    assert store is not None
    _, entries = await store.read(pid)
    return [(entry.t, decode_event(entry.e).data) for entry in entries]


async def kinds(app: AppContext, pid: str) -> list[str]:
    """The event types of the preparation's stream, oldest first."""
    return [kind for kind, _ in await ledger_events(app, pid)]


def answer(action: str, content: dict[str, Any] | None = None) -> types.ElicitResult:
    return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]


@dataclass
class Person:
    """An elicitation callback: records every request it is shown, answers each from `answers`
    (the last one repeats)."""

    answers: list[types.ElicitResult] = field(default_factory=lambda: [answer("accept", SEND)])
    shown: list[types.ElicitRequestParams] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.shown.append(params)
        return self.answers[min(len(self.shown), len(self.answers)) - 1]

    @property
    def messages(self) -> list[str]:
        return [p.message for p in self.shown]


def accepting(content: dict[str, Any] | None = None) -> Person:
    return Person([answer("accept", SEND if content is None else content)])


@contextlib.asynccontextmanager
async def shared_server(
    env: Mapping[str, str], principal_of: Callable[[Any], Principal]
) -> AsyncIterator[tuple[Server[Any], AppContext]]:
    """One server (one request-state key) for several in-process clients; principal_of sees
    each request's context."""
    config = load_config(env)
    assert config.mail is not None, config.problems
    app = build_app(config)
    await app.start()
    try:
        yield build_server(app, principal_of), app
    finally:
        await app.aclose()


def principal(owner: str) -> Principal:
    return msgspec.structs.replace(local_principal(owner, ALL_SCOPES), grant=None)


def sends(services: Services, rcpt: str) -> int:
    """How many SMTP transactions the sink saw for this recipient."""
    return len(transactions(services.smtp_spool, rcpt=rcpt))


def refusals(events: list[tuple[str, Any]]) -> list[str]:
    """The reasons of the approval_refused annotations, oldest first."""
    return [data.reason for kind, data in events if kind == "approval_refused"]


def stdio_target(env: Mapping[str, str]) -> StdioServerParameters:
    """`angelos serve --transport stdio` of this checkout (as tests/protocol/test_stdio.py)."""
    command = angelos_command("serve", "--transport", "stdio")
    return StdioServerParameters(command=command[0], args=command[1:], env=clean_env(env), cwd=ROOT)
