"""What one tools/call can do to reach a person: the protocol era, the client's elicitation
capability, its answers on a retried call, and (handshake era) a way to ask now."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from msgspec import Struct

from schemas.ledger_events import ClientText

# A form answer as the client gave it: (action, content). Content stays untyped until checked.
Answer = tuple[str, Any]
Ask = Callable[[str, dict[str, Any]], Awaitable[Answer]]
ANSWER_KEY: Final = "approve"  # the key of our one input request in the 2026-07-28 era


class Channel(Struct, frozen=True, kw_only=True):
    """The approval paths one call offers; NO_CHANNEL offers none (fail closed)."""

    protocol: str = ""  # the protocol revision of the call, "" when unknown
    stateless_era: bool = False  # 2026-07-28: ask by InputRequiredResult, answer on a retry
    client_name: str = ""
    client_version: str = ""
    form: bool = False  # the client declared form-mode elicitation
    url: bool = False  # the client declared URL-mode elicitation
    ask: Ask | None = None  # handshake era with a back-channel: elicitation/create now
    answer: Answer | None = None  # 2026-07-28 retry: the client's answer to our request
    state: str | None = None  # 2026-07-28 retry: our request state, already verified by the SDK


NO_CHANNEL: Final = Channel()


def client_text(value: object) -> ClientText:
    """A client's self-reported name or version, cut to what a ledger event may hold."""
    text = value if isinstance(value, str) else ""
    kept = "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text[:100])
    return kept
