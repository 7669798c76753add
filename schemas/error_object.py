"""The application error object every failed tool call returns."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Struct, UnsetType


class RetryHint(Struct):
    """What the caller may do next; never a permission to retry automatically."""

    transport_retry_safe: bool
    action: str


class ErrorObject(Struct, omit_defaults=True):
    """The structured content of an isError result."""

    error: str
    outcome: Any
    retry_safe: bool
    error_code: str
    recovery: str
    retry: RetryHint
    required_scope: str | UnsetType = UNSET
    required_scopes: list[str] | UnsetType = UNSET


# code -> (retry.action, recovery sentence)
GUIDANCE: dict[str, tuple[str, str]] = {
    "invalid_arguments": (
        "correct_input",
        "Fix the request using tools/list and the action's fields, then send a new request.",
    ),
    "stale_reference": (
        "refresh_reference",
        "Search again for a fresh exact reference; discard old references and cursors.",
    ),
    "conflict": (
        "refresh_reference",
        "Reread the message's flags and modseq before deciding on a new change.",
    ),
    "not_found": (
        "refresh_reference",
        "Search again: the message may have moved or been deleted.",
    ),
    "unsupported_operation": (
        "check_capabilities",
        "Check capabilities and provider limits, then choose a supported operation.",
    ),
    "safety_limit": (
        "narrow_request",
        "Narrow the request or use smaller pages; inspect any partial outcome.",
    ),
    "service_unavailable": (
        "check_service",
        "Check connectivity and credentials; repeat reads only after that, and verify "
        "mutations before any retry.",
    ),
    "outcome_unknown": (
        "verify_outcome",
        "Inspect the mailbox before any new change; for sending, inspect send_status and "
        "Sent and never resend.",
    ),
    "deadline_exceeded": (
        "check_outcome",
        "Reads may be repeated after a pause; inspect mutations and sends first.",
    ),
    "deployment_disabled": (
        "contact_operator",
        "Ask the operator to enable this capability; never work around a gate.",
    ),
    "insufficient_scope": (
        "reauthorize",
        "Obtain the missing scope from the owner, then send a new request.",
    ),
    "recipient_not_allowed": (
        "correct_input",
        "Ask the owner which recipients are allowed, or prepare a message to allowed "
        "recipients only; the refused ones are named by position.",
    ),
    "approval_unavailable": (
        "approve_out_of_band",
        "Ask the owner to approve this send where they can (the approval page, or a client "
        "that supports elicitation), then confirm again; nothing was sent.",
    ),
    "approval_declined": (
        "ask_owner",
        "Nothing was sent and the preparation stays usable until it expires; confirm again "
        "only if the owner asks you to.",
    ),
    "rate_limited": (
        "wait_until",
        "Nothing was sent or consumed; confirm the same preparation again after the time in "
        "the outcome, if it has not expired by then.",
    ),
    "operation_failed": (
        "inspect_error",
        "Inspect the error and any partial outcome; never resend or duplicate a preparation "
        "automatically.",
    ),
}
DRAFT_CONFLICT_RECOVERY = (
    "Reread the complete draft with mail_query draft and review its new source_digest; "
    "the original was not changed."
)


def build_error(
    code: str,
    message: str,
    *,
    read_only: bool,
    outcome: Any = None,
    recovery: str | None = None,
    required_scope: str | UnsetType = UNSET,
    required_scopes: list[str] | UnsetType = UNSET,
) -> ErrorObject:
    """Assemble the error object for a code, with the tool's read-only hint as retry_safe."""
    action, default_recovery = GUIDANCE[code]
    return ErrorObject(
        error=message,
        outcome=outcome,
        retry_safe=read_only,
        error_code=code,
        recovery=recovery or default_recovery,
        retry=RetryHint(
            transport_retry_safe=read_only and code != "outcome_unknown", action=action
        ),
        required_scope=required_scope,
        required_scopes=required_scopes,
    )
