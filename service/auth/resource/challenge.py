"""The Bearer challenges of the resource server, built from configuration only."""

from __future__ import annotations

from typing import Final

# What a step-up asks for, by the scopes an operation lacks; anything else asks for mail.read.
_STEP_UP: Final = {
    "mail.write mail.send": "mail.read mail.write mail.send",
    "mail.write": "mail.read mail.write",
    "mail.send": "mail.read mail.send",
}
STEP_UP_DESCRIPTION: Final = "Additional mailbox permission requires owner consent"


def challenge(metadata_url: str, scope: str, error: str | None = None) -> str:
    """Format `Bearer resource_metadata="…", scope="…"[, error="…"]`."""
    value = f'Bearer resource_metadata="{metadata_url}", scope="{scope}"'
    return value if error is None else f'{value}, error="{error}"'


def step_up_scope(missing: str) -> str:
    """Map the missing scopes (space-joined) to the scope a step-up requests."""
    return _STEP_UP.get(missing, "mail.read")


def step_up_challenge(metadata_url: str, missing: str, description: str) -> str:
    """The insufficient_scope challenge a tool result carries in _meta."""
    base = challenge(metadata_url, step_up_scope(missing), "insufficient_scope")
    return f'{base}, error_description="{description}"'
