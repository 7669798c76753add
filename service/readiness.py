"""The one access rule: scope, gate, provider and store for each operation class.

Every tool call is refused with the first blocker this rule finds for its class, and
`mail_query capabilities` reports all of them for the caller, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

import msgspec

from schemas import errors
from schemas.mailbox import ServerCapabilities
from schemas.readiness import (
    CLASS_SCOPES,
    Blocker,
    ClassReadiness,
    OperationClass,
    Readiness,
)
from schemas.results import GMAIL_DELETE_RESTRICTION
from service.context import AppContext
from service.principal import LOCAL_ISSUER, Principal

WRITES_OFF = Blocker(
    "gate",
    "mailbox writes are disabled by the server operator (MAIL_ENABLE_WRITES is not 1)",
    variable="MAIL_ENABLE_WRITES",
)
DELETE_OFF = Blocker(
    "gate",
    "permanent deletion is disabled by the server operator (MAIL_ENABLE_DELETE is not 1)",
    variable="MAIL_ENABLE_DELETE",
)
SENDING_NEEDS = "sending requires explicit server enablement and a durable send store"
SEND_OFF = Blocker(
    "gate", f"{SENDING_NEEDS}: MAIL_ENABLE_SEND is not 1", variable="MAIL_ENABLE_SEND"
)
NO_STATUS_STORE = Blocker(
    "store",
    "send status needs a durable send store; unavailable status is not proof that nothing was sent",
)
GRAPH_DELETE = "permanent deletion is unsupported for Microsoft Graph"
NO_UID_EXPUNGE = "permanent deletion needs UIDPLUS (UID EXPUNGE), which this server lacks"


def missing_scopes_note(principal: Principal, scopes: Sequence[str]) -> str:
    """Say who can grant missing scopes: the operator for a local caller, else the owner."""
    names = " ".join(scopes)
    if principal.issuer == LOCAL_ISSUER:
        return f"{names} is not in ANGELOS_LOCAL_SCOPES, which the operator sets"
    return f"the access token does not grant {names}; the owner must consent to it"


def blockers(
    app: AppContext,
    principal: Principal,
    op: OperationClass,
    server: ServerCapabilities | None = None,
) -> list[Blocker]:
    """List what keeps this caller from one operation class, in the order calls are checked.

    Without `server` only what is known without I/O counts: the mailbox operation refuses what
    the IMAP server turns out not to support, after every other check, so that comes last.
    """
    found = [
        Blocker("scope", missing_scopes_note(principal, [scope]), scope=scope)
        for scope in CLASS_SCOPES[op]
        if not principal.has(scope)
    ]
    if op in ("write", "delete") and not app.gates.writes:
        found.append(WRITES_OFF)
    if op == "delete":
        config_refusals = _delete_unsupported(app)
        found.extend(Blocker("provider", reason) for reason in config_refusals)
        if not app.gates.delete:
            found.append(DELETE_OFF)
        if server is not None and not config_refusals:  # what the mailbox call would find
            found.extend(Blocker("provider", reason) for reason in _server_refusals(server))
    elif op == "send":
        found.extend(send_blockers(app))
    elif op == "send_status" and not app.store_configured:
        found.append(NO_STATUS_STORE)
    return found


def send_blockers(app: AppContext) -> list[Blocker]:
    """What the operator's gate and the ledger store put in the way of sending right now."""
    found = [] if app.gates.send else [SEND_OFF]
    if not app.sending.usable:
        reason = app.sending.reason or "the store failed its self-check"
        found.append(Blocker("store", f"{SENDING_NEEDS}: {reason}"))
    return found


def send_health(app: AppContext) -> dict[str, object]:
    """The `sending` part of /healthz: ready, or the first reason not, and a rollback halt."""
    found = send_blockers(app)
    monitor = app.sending.monitor
    health: dict[str, object] = {
        "ready": not found,
        "reason": found[0].reason if found else "",
        "ledger_halted": monitor is not None and monitor.halt is not None,
    }
    if app.archive is not None and app.archive.status is not None:
        health["ledger_archive"] = msgspec.to_builtins(app.archive.status)
    return health


def _delete_unsupported(app: AppContext) -> list[str]:
    mail = app.config.mail
    if mail is not None and mail.provider == "microsoft":
        return [GRAPH_DELETE]
    if mail is not None and mail.gmail_imap:
        return [GMAIL_DELETE_RESTRICTION]
    return []


def _server_refusals(server: ServerCapabilities) -> list[str]:
    if server.gmail_labels:
        return [GMAIL_DELETE_RESTRICTION]
    if not server.uid_expunge:
        return [NO_UID_EXPUNGE]
    return []


def readiness(app: AppContext, principal: Principal, server: ServerCapabilities) -> Readiness:
    """Report every operation class for this caller, with everything in the way of each."""
    report = {}
    for op in get_args(OperationClass):
        found = blockers(app, principal, op, server)
        report[op] = ClassReadiness(ready=not found, blocked_by=found)
    return Readiness(**report)


def operator_blockers(found: Sequence[Blocker]) -> list[Blocker]:
    """Keep what the operator or provider decides, leaving out the caller's scopes."""
    return [blocker for blocker in found if blocker.kind != "scope"]


def refusal(blocker: Blocker) -> errors.MailError:
    """Turn the first blocker of a call into the error the call answers."""
    if blocker.kind == "scope":
        return errors.InsufficientScope(blocker.scope)
    if blocker.kind == "provider":
        return errors.UnsupportedOperation(blocker.reason)
    return errors.DeploymentDisabled(blocker.reason)
