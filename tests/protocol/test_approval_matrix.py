"""The approval outcome table: protocol era x client capability x approval mode.

Each row is one real in-process MCP client confirming one preparation; the person (when the
client can reach one) accepts whatever it is shown: `{"decision": "send"}` for a form, a bare
accept for a URL (without ever opening the page). The passkey modes need the first-party
authorization server's configuration (its page is where a passkey is given); the server itself
is not started, so no passkey approval is ever recorded here. docs/tools.md carries the table.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext

from service.approval.links import APPROVE_PATH
from service.auth.server.bootstrap import new_bootstrap_token
from service.config import load_config
from support.angelos_process import free_port
from support.approval import SEND, approval_env, confirm, error_code, kinds, prepare, recipient
from support.approval import sends as sends_to
from support.first_party import first_party_env
from support.inprocess import mcp_client
from support.services import Services

FORM_URL = "form+url"  # what the SDK's client declares once it has an elicitation callback
NONE = "none"
# (era, client capability, mode) -> (how the person was asked, the answer, the page named)
MATRIX: dict[tuple[str, str, str], tuple[str, str, bool]] = {
    ("legacy", NONE, "elicitation"): ("-", "approval_unavailable", False),
    ("legacy", NONE, "passkey"): ("-", "approval_unavailable", True),
    ("legacy", NONE, "elicitation_or_passkey"): ("-", "approval_unavailable", True),
    ("legacy", FORM_URL, "elicitation"): ("form", "sent", False),
    ("legacy", FORM_URL, "passkey"): ("-", "approval_unavailable", True),
    ("legacy", FORM_URL, "elicitation_or_passkey"): ("form", "sent", False),
    ("2026-07-28", NONE, "elicitation"): ("-", "approval_unavailable", False),
    ("2026-07-28", NONE, "passkey"): ("-", "approval_unavailable", True),
    ("2026-07-28", NONE, "elicitation_or_passkey"): ("-", "approval_unavailable", True),
    ("2026-07-28", FORM_URL, "elicitation"): ("form", "sent", False),
    # The page's URL is offered; an accept that never reached the page approves nothing.
    ("2026-07-28", FORM_URL, "passkey"): ("url", "approval_unavailable", False),
    ("2026-07-28", FORM_URL, "elicitation_or_passkey"): ("form", "sent", False),
}


class Accepts:
    """A person who accepts every request; records how each was made."""

    def __init__(self) -> None:
        self.shown: list[types.ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.shown.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=SEND)


def mode_env(services: Services, mode: str) -> dict[str, str]:
    env = approval_env(services, mode)
    if mode == "elicitation":
        return env
    _, token_hash = new_bootstrap_token()
    party = first_party_env(services, free_port(), "owner-matrix", token_hash)
    return {**party, **env}


@pytest.mark.parametrize(("era", "capability", "mode"), list(MATRIX))
async def test_the_outcome_table(services: Services, era: str, capability: str, mode: str) -> None:
    rcpt, person = recipient("mx"), Accepts()
    env = mode_env(services, mode)
    options: dict[str, Any] = {} if capability == NONE else {"elicitation_callback": person}
    async with mcp_client(env, mode=era, **options) as (client, app):
        preview = await prepare(client, [rcpt])
        pid = preview["prepared_id"]
        result = await confirm(client, preview)
        types_after = await kinds(app, pid)
    asked = "-" if not person.shown else person.shown[0].mode
    code = error_code(result) or "sent"
    text = str((result.structured_content or {}).get("error", ""))
    page = f"{APPROVE_PATH}{pid}"
    assert MATRIX[(era, capability, mode)] == (asked, code, page in text), text
    assert len(person.shown) <= 1
    if asked == "url":
        (shown,) = person.shown
        assert isinstance(shown, types.ElicitRequestURLParams)
        assert shown.url.endswith(page) and shown.url.startswith("https://localhost:")
    sent = code == "sent"
    assert (1 if sent else 0) == sends_to(services, rcpt)
    assert sent == ("approved" in types_after) == ("claimed" in types_after)
    assert (asked != "-") == ("approval_requested" in types_after)


async def test_a_passkey_mode_without_the_first_party_server_keeps_sending_off(
    services: Services,
) -> None:
    env = approval_env(services, "passkey")
    problems = load_config(env).problems
    assert any("passkey needs the first-party authorization server" in p for p in problems)
    async with mcp_client(env) as (client, _):
        capabilities = await client.call_tool("mail_query", {"action": "capabilities"})
    assert False is (capabilities.structured_content or {})["send_enabled"]
