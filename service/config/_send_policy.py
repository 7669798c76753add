"""The send-policy group: approval, recipient allowlist and rate limit (docs/configuration.md)."""

from __future__ import annotations

from collections.abc import Mapping

from schemas.send_policy import Approval, RateLimit, RecipientAllowlist, SendPolicy, accepts
from service.config._first_party import first_party_enabled
from service.config.table.variables import read


def load_send_policy(env: Mapping[str, str]) -> tuple[SendPolicy, tuple[str, ...]]:
    """Build the owner's send policy; a refused value leaves its part unset and adds a problem."""
    problems: list[str] = []
    approval: Approval | None = read(env, "ANGELOS_SEND_APPROVAL", problems)
    allowlist: RecipientAllowlist | None = read(env, "MAIL_SEND_ALLOWED_RECIPIENTS", problems)
    rate: RateLimit | None = read(env, "MAIL_SEND_RATE_LIMIT", problems)
    policy = SendPolicy(approval=approval or "off", allowlist=allowlist, rate=rate)
    # A passkey is given on the approval page, which only the first-party server serves.
    required = policy.required
    if required is not None and accepts(required, "passkey") and not first_party_enabled(env):
        problems.append(
            f"ANGELOS_SEND_APPROVAL: {required} needs the first-party authorization server"
            " (ANGELOS_OAUTH_ENABLED=1)"
        )
    return policy, tuple(problems)
