"""One tool call from arguments to result: decode, scope, gates, operation, error mapping."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from schemas import errors
from schemas.args.prepare import SendConfirmed
from schemas.args.query import SendStatus
from schemas.discovery import TOOLS_BY_NAME, ToolSpec
from schemas.error_object import DRAFT_CONFLICT_RECOVERY, ErrorObject, build_error
from schemas.mutations import REFUSED_ARGUMENT_OUTCOMES
from schemas.readiness import OperationClass
from schemas.scopes import BASE_SCOPE
from service.approval.channel import NO_CHANNEL, Channel
from service.approval.gate import AskApproval, approve
from service.auth.resource.challenge import STEP_UP_DESCRIPTION, step_up_challenge
from service.context import AppContext
from service.principal import LOCAL_ISSUER, Principal
from service.readiness import blockers, missing_scopes_note, refusal

TOOL_DEADLINE_S = 90.0
MAX_ERROR_DETAIL = 300
SENT_COPY_DESCRIPTION = (
    "Saving the Sent copy also requires owner consent for mail.write; no message was sent"
)
log = structlog.get_logger("angelos.call")


class CallResult(msgspec.Struct, frozen=True):
    """What the MCP layer returns: structured content, its JSON text, and error metadata."""

    structured: dict[str, Any]
    text: str
    is_error: bool
    meta: dict[str, Any] | None = None
    ask: AskApproval | None = None  # 2026-07-28: ask a person first, then the call is retried


def asking(ask: AskApproval) -> CallResult:
    """The answer that asks the client to get a person's approval and retry the call."""
    return CallResult(structured={}, text="", is_error=False, ask=ask)


def decode_type(tool: ToolSpec) -> Any:
    """Return the msgspec type one tool's arguments decode into."""
    if tool.actions:
        union: Any = tool.actions[0]
        for action in tool.actions[1:]:
            union = union | action
        return union
    return tool.direct


DECODE_TYPES = {name: decode_type(tool) for name, tool in TOOLS_BY_NAME.items()}


def decode_arguments(tool: ToolSpec, arguments: object) -> msgspec.Struct:
    """Decode arguments into the tool's action Struct or raise InvalidArguments."""
    if not isinstance(arguments, dict):
        raise errors.InvalidArguments("invalid request: arguments must be a JSON object")
    try:
        decoded: msgspec.Struct = msgspec.convert(arguments, DECODE_TYPES[tool.name], strict=True)
    except msgspec.ValidationError as exc:
        detail = str(exc)
        if len(detail) > MAX_ERROR_DETAIL:
            detail = detail[:MAX_ERROR_DETAIL] + "…"
        outcome = REFUSED_ARGUMENT_OUTCOMES.get((tool.name, str(arguments.get("action"))))
        raise errors.InvalidArguments(f"invalid request: {detail}", outcome=outcome) from None
    return decoded


def action_name(args: msgspec.Struct) -> str:
    """Name the action of decoded arguments ('' for tools without actions)."""
    tag = args.__struct_config__.tag  # not msgspec.inspect: that rebuilds type info per call
    return tag if isinstance(tag, str) else ""


def check_access(app: AppContext, tool: ToolSpec, principal: Principal, args: object) -> None:
    """Refuse with the first blocker of the call's operation class, then action rules; no I/O."""
    op: OperationClass = "send_status" if isinstance(args, SendStatus) else tool.access
    found = blockers(app, principal, op)
    if found:
        raise refusal(found[0])
    if isinstance(args, SendConfirmed) and args.append_sent:
        check_sent_filing(app, principal)


def check_sent_filing(app: AppContext, principal: Principal) -> None:
    """Refuse a Sent copy the provider or the operator does not allow, before any claim."""
    if app.smtp_stores_sent:
        raise errors.OperationFailed(
            "this provider saves Sent automatically; use append_sent=false (no message was sent)"
        )
    if not app.gates.writes:
        raise errors.DeploymentDisabled(
            "filing a Sent copy needs mailbox writes enabled; no message was sent"
        )
    if not principal.has("mail.write"):
        raise errors.InsufficientScope(
            "mail.write",
            "mail.send",
            message="a Sent copy needs the mail.write scope; no message was sent",
        )


async def call_tool(
    app: AppContext, principal: Principal, name: str, arguments: object,
    channel: Callable[[], Channel] = lambda: NO_CHANNEL,
) -> CallResult:  # fmt: skip
    """Run one tools/call and return its result; every exception becomes an error result.

    A send that needs a person's approval gets it through `channel()` first, outside the tool
    deadline (a person takes longer than a mailbox).
    """
    tool = TOOLS_BY_NAME[name]
    started = time.perf_counter()
    action = ""
    outcome = "cancelled"  # stays so only when the client cancels the call
    try:
        args = decode_arguments(tool, arguments if arguments is not None else {})
        action = action_name(args)
        check_access(app, tool, principal, args)
        handler = app.handlers.get(type(args))
        if handler is None:
            label = f"{name} action {action!r}" if action else name
            raise errors.UnsupportedOperation(f"{label} is not available in this release yet")
        try:
            result = await within_deadline(handler(app, principal, args))
        except errors.ApprovalNeeded:
            if not isinstance(args, SendConfirmed):
                raise
            # A person's answer takes longer than a mailbox: asked outside the tool deadline.
            ask = await approve(app, principal, args, channel())
            if ask is not None:
                outcome = "approval_requested"
                return asking(ask)
            result = await within_deadline(handler(app, principal, args))
        outcome = "ok"
        return success(result)
    except errors.MailError as exc:
        outcome = exc.code
        return failure(app, tool, exc, principal)
    except Exception as exc:  # the boundary: nothing unclassified may reach the client
        outcome = "operation_failed"
        log.error(
            "unclassified_error",
            tool=name,
            action=action,
            error_type=type(exc).__name__,
            stack="".join(traceback.format_tb(exc.__traceback__)),
        )
        internal = errors.OperationFailed("internal error; nothing was retried")
        return failure(app, tool, internal, principal)
    finally:
        log.info(
            "tool_call",
            tool=name,
            action=action,
            outcome=outcome,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )


async def within_deadline(call: Awaitable[msgspec.Struct]) -> msgspec.Struct:
    """Await one operation under the tool deadline."""
    try:
        async with asyncio.timeout(TOOL_DEADLINE_S):
            return await call
    except TimeoutError as exc:
        if isinstance(exc, errors.MailError):
            raise
        raise errors.DeadlineExceeded() from None


def success(result: msgspec.Struct) -> CallResult:
    """Encode a result Struct once: the JSON text and structured content come from one encode."""
    raw = msgspec.json.encode(result)
    return CallResult(structured=msgspec.json.decode(raw), text=raw.decode(), is_error=False)


def failure(
    app: AppContext, tool: ToolSpec, exc: errors.MailError, principal: Principal
) -> CallResult:
    """Build the error result: the text content is the same error object as the structured one;
    a scope error also names what is missing and carries the OAuth step-up challenge."""
    extra: dict[str, Any] = {}
    message = exc.message
    if isinstance(exc, errors.InsufficientScope):
        if len(exc.required) == 1:
            extra["required_scope"] = exc.required[0]
        else:
            extra["required_scopes"] = [BASE_SCOPE, *exc.required]
        if principal.issuer == LOCAL_ISSUER:  # nobody to consent: the operator grants scopes
            missing = [scope for scope in exc.required if not principal.has(scope)]
            message += f" ({missing_scopes_note(principal, missing)})"
    obj: ErrorObject = build_error(
        exc.code,
        message,
        read_only=tool.read_only,
        outcome=exc.outcome,
        recovery=DRAFT_CONFLICT_RECOVERY if isinstance(exc, errors.DraftConflict) else None,
        **extra,
    )
    raw = msgspec.json.encode(obj)
    structured = msgspec.json.decode(raw)
    meta = None
    if isinstance(exc, errors.InsufficientScope) and app.resource_metadata_url:
        # Only the Sent-copy refusal lacks two scopes; its consent prompt says nothing was sent.
        description = STEP_UP_DESCRIPTION if len(exc.required) == 1 else SENT_COPY_DESCRIPTION
        value = step_up_challenge(app.resource_metadata_url, " ".join(exc.required), description)
        meta = {"mcp/www_authenticate": [value]}
    return CallResult(structured, raw.decode(), True, meta)
