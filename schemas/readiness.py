"""Operation classes, the scopes each needs, and how capabilities reports a caller's readiness."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct, field

from schemas.scopes import Scope

OperationClass = Literal["read", "write", "delete", "send", "send_status"]
BlockerKind = Literal["scope", "gate", "provider", "store"]

# The scopes a caller needs for each class; a tool advertises the scopes of its class.
CLASS_SCOPES: dict[OperationClass, tuple[Scope, ...]] = {
    "read": ("mail.read",),
    "write": ("mail.read", "mail.write"),
    "delete": ("mail.read", "mail.write"),
    "send": ("mail.read", "mail.send"),
    "send_status": ("mail.read", "mail.send"),
}


class Blocker(Struct, frozen=True, omit_defaults=True):
    """One thing that keeps a caller from an operation class, with what to change."""

    kind: BlockerKind
    reason: str
    scope: str = ""  # the missing scope (kind "scope")
    variable: str = ""  # the operator's switch (kind "gate")


class ClassReadiness(Struct, frozen=True, omit_defaults=True):
    """Whether this caller can use one operation class now, and if not, everything in the way."""

    ready: bool
    blocked_by: list[Blocker] = field(default_factory=list)


class Readiness(Struct, frozen=True):
    """Readiness of every operation class for the calling principal."""

    read: ClassReadiness
    write: ClassReadiness
    delete: ClassReadiness
    send: ClassReadiness
    send_status: ClassReadiness
