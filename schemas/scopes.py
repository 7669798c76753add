"""The scope vocabulary of the mailbox: the three scopes, their order, and how a list is read.

Wire truth shared by the resource server, the authorization server, the configuration and the
tool boundary: one Literal type, one order, one parsing rule.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Scope = Literal["mail.read", "mail.write", "mail.send"]
SCOPE_ORDER: Final[tuple[Scope, ...]] = get_args(Scope)  # every grant lists scopes in this order
BASE_SCOPE: Final[Scope] = "mail.read"  # every grant and every operation needs it


def parse_scope_list(text: str) -> tuple[Scope, ...] | None:
    """Parse 1-3 distinct scopes joined by single spaces and including mail.read, in order."""
    items = text.split(" ")
    if not 1 <= len(items) <= len(SCOPE_ORDER):
        return None
    if any(item not in SCOPE_ORDER for item in items) or len(set(items)) != len(items):
        return None
    if BASE_SCOPE not in items:
        return None
    return tuple(scope for scope in SCOPE_ORDER if scope in items)


def is_scope(value: str) -> bool:
    """Tell whether a string is one of the three scopes."""
    return value in SCOPE_ORDER
