"""The approval gate on the MCP SDK: a call's channel from its context, and the ask as a result.

In the 2026-07-28 era the SDK's request-state boundary seals our state, binds it to the calling
principal (owner and grant: our bearer middleware leaves the SDK's own token context empty) and
rejects a tampered or expired one with -32602 before any handler runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from service.approval.channel import ANSWER_KEY, Answer, Channel
from service.approval.gate import SCHEMA, STATE_TTL_MS, AskApproval
from service.principal import Principal

Context = ServerRequestContext[Any, Any]


def channel_of(ctx: Context, params: types.CallToolRequestParams) -> Channel:
    """What this call offers to reach a person, in its protocol era."""
    session = ctx.session
    capabilities = session.client_capabilities
    elicitation = None if capabilities is None else capabilities.elicitation
    client = None if session.client_params is None else session.client_params.client_info
    stateless = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    # A handshake-era client that declares `elicitation: {}` means form mode.
    form = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
    ask = None
    if not stateless and form and session.can_send_request:

        async def ask_form(message: str, schema: dict[str, Any]) -> Answer:
            result = await session.elicit_form(message, schema, related_request_id=ctx.request_id)
            return result.action, result.content

        ask = ask_form
    answer = None
    if stateless and params.input_responses:
        response = params.input_responses.get(ANSWER_KEY)
        dumped = response.model_dump() if response is not None else {}
        answer = (str(dumped.get("action", "")), dumped.get("content"))
    return Channel(
        protocol=ctx.protocol_version or "",
        stateless_era=stateless,
        client_name="" if client is None else client.name,
        client_version="" if client is None else client.version,
        form=form,
        url=elicitation is not None and elicitation.url is not None,
        ask=ask,
        answer=answer,
        state=params.request_state if stateless else None,
    )


def input_required(ask: AskApproval) -> types.InputRequiredResult:
    """The 2026-07-28 result that asks the client to get the approval and retry the call."""
    params: types.ElicitRequestParams
    if ask.url is not None:
        params = types.ElicitRequestURLParams(message=ask.message, url=ask.url)
    else:
        params = types.ElicitRequestFormParams(message=ask.message, requested_schema=SCHEMA)
    return types.InputRequiredResult(
        input_requests={ANSWER_KEY: types.ElicitRequest(params=params)},
        request_state=ask.state,
    )


def state_boundary(principal_of: Callable[[Context], Principal]) -> RequestStateBoundary:
    """Seal request state under a key of this process, bound to the caller's owner and grant."""

    def bound(ctx: Context) -> str:
        principal = principal_of(ctx)
        return f"{principal.owner}:{principal.grant or ''}"

    security = RequestStateSecurity.ephemeral(ttl=STATE_TTL_MS / 1000)
    security.bind_principal = bound
    return RequestStateBoundary(security, default_audience="angelos")
