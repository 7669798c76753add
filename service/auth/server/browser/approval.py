"""/oauth/approve/<pid>: the owner approves one prepared send with a passkey.

GET shows the signed-in owner the preparation's stored envelope (approval.text.envelope_lines,
nothing a client says about it), or why it cannot be approved; signed out, the sign-in page is
rendered at this URL and returns here. The button runs a passkey assertion with user
verification: POST `<pid>/begin` answers the request options, whose challenge is a stored
one-time nonce bound to this pid and to the SHA-256 of the lines shown (approval_state.py);
POST `<pid>` verifies the assertion with the relying party of the sign-in, re-reads the stream
and appends `approved` (mode passkey, the shown text's and the credential ID's SHA-256).
POST `<pid>/decline` records `approval_refused` (declined). Every POST passes the same-origin
and CSRF checks of the other owner POSTs; a refusal, a failed assertion or a store that does
not answer writes nothing. Logs name the pid and the rule, never the envelope.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec
import structlog
from aiohttp import web

from ledger.ids import new_id
from schemas.ledger import LedgerUnavailable
from schemas.ledger_events import ApprovalRefused, EventData
from service.auth.server.errors import OAuthError
from service.auth.server.send_ledger import SendLedger, SendLedgerSource
from service.auth.server.store import PASSKEY_BEGIN, PASSKEY_FINISH, BudgetRule, OAuthStore
from service.principal import owner_binding

from .approval_state import (
    Approvable,
    Reason,
    Refused,
    approval_challenge,
    approved_event,
    binding,
    read_preparation,
    split_challenge,
)
from .approval_view import approval_page, refusal_page
from .endpoint import BrowserContext, see_other
from .guard import csrf_matches, header_csrf, one, read_form, read_json
from .passkeys import PasskeyRefused, PasskeyUse, challenge_of
from .session import Visit, current, posting_visit, spend

APPROVE_ROUTE: Final = "/oauth/approve/{pid:[0-9a-f]{32}}"
SignInPage = Callable[[OAuthStore, Visit | None, str], Awaitable[web.StreamResponse]]
# A refusal of the JSON endpoints: its status and error code.
REFUSALS: Final[dict[Reason, tuple[int, str]]] = {
    "unknown": (404, "unknown_send"),
    "unreadable": (409, "send_unreadable"),
    "not_required": (409, "approval_not_required"),
    "elicitation_only": (409, "passkey_not_accepted"),
    "approved": (409, "already_approved"),
    "declined": (409, "declined"),
    "expired": (410, "send_expired"),
    "claimed": (409, "already_claimed"),
}
log = structlog.get_logger("angelos.oauth")


class ApproveBegin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """<pid>/begin: the SHA-256 of the text the page shows (a changed text refuses)."""

    shown_sha256: str


class ApproveFinish(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """<pid>: the assertion."""

    credential: PasskeyUse


class ApprovalPages:
    """The approval page, its passkey ceremony and the decline form."""

    def __init__(
        self, context: BrowserContext, ledger_of: SendLedgerSource, sign_in: SignInPage
    ) -> None:
        self.context = context
        self.ledger_of = ledger_of
        self.sign_in = sign_in
        config = context.config
        self.owner = owner_binding(config.issuer, config.resource, config.owner)

    async def show(self, request: web.Request) -> web.StreamResponse:
        """The envelope and the buttons, or why nothing can be approved; signed out, sign in."""
        pid = request.match_info["pid"]
        store = self.context.store()
        visit = await current(store, request, self.context.visitors)
        if visit is None or not visit.signed_in:
            return await self.sign_in(store, visit, f"/oauth/approve/{pid}")
        found = await self._read(self._ledger(), pid)
        mail_from = self.context.config.mail_from
        if isinstance(found, Refused):
            return refusal_page(found.reason, mail_from)
        return approval_page(
            csrf=visit.csrf, pid=pid, lines=found.lines, shown=found.shown, mail_from=mail_from
        )

    async def begin(self, request: web.Request) -> web.StreamResponse:
        """The assertion's request options, the challenge bound to this pid and text."""
        pid = request.match_info["pid"]
        store = self.context.store()
        visit = await self._ceremony_visit(request, store, PASSKEY_BEGIN)
        body = await read_json(request, ApproveBegin)
        found = _approvable(await self._read(self._ledger(), pid))
        if not hmac.compare_digest(body.shown_sha256.encode(), found.shown.encode()):
            raise OAuthError(409, "approval_changed")  # the page is out of date: reload it
        owner = await store.owner.load()
        if owner is None:
            raise OAuthError(409, "no_owner")
        nonce = await store.sessions.put_challenge(visit.session, "approve")
        options = self.context.relying_party.authentication_options(
            approval_challenge(nonce.reveal(), pid, found.shown), owner.credentials
        )
        return web.Response(text=options, content_type="application/json")

    async def finish(self, request: web.Request) -> web.StreamResponse:
        """Verify the assertion and record the approval; say where to go next."""
        pid = request.match_info["pid"]
        store = self.context.store()
        visit = await self._ceremony_visit(request, store, PASSKEY_FINISH)
        try:
            await self._approve(request, store, visit, pid)
        except OAuthError as refused:
            log.warning("send_approval_refused", pid=pid, rule=refused.error)
            raise
        log.info("send_approved", pid=pid, mode="passkey")
        return web.json_response({"next": f"/oauth/approve/{pid}"})

    async def _approve(
        self, request: web.Request, store: OAuthStore, visit: Visit, pid: str
    ) -> None:
        used = (await read_json(request, ApproveFinish)).credential
        challenge = challenge_of(used.response.clientDataJSON)
        parts = None if challenge is None else split_challenge(challenge)
        if challenge is None or parts is None:
            raise OAuthError(400, "malformed_request")
        nonce, bound = parts
        if await store.sessions.take_challenge(nonce, visit.session, "approve") is None:
            raise OAuthError(400, "ceremony_expired")
        ledger = self._ledger()
        found = _approvable(await self._read(ledger, pid))
        if not hmac.compare_digest(bound, binding(pid, found.shown)):
            raise OAuthError(409, "approval_changed")
        owner = await store.owner.load()
        known = [] if owner is None else owner.credentials
        matching = [c for c in known if c.credential_id == used.rawId == used.id]
        if not matching:
            raise OAuthError(400, "passkey_refused")
        try:
            count = self.context.relying_party.verify_authentication(used, challenge, matching[0])
        except PasskeyRefused:
            raise OAuthError(400, "passkey_refused") from None
        if not await store.owner.update_sign_count(matching[0].credential_id, count):
            raise OAuthError(400, "passkey_refused")
        changed = await self._record(
            ledger, found, approved_event(found.shown, matching[0].credential_id)
        )
        if changed is not None:
            _approvable(changed)  # raises the reason

    async def decline(self, request: web.Request) -> web.StreamResponse:
        """Record that the owner declined (nothing else changes), then show the page again."""
        pid = request.match_info["pid"]
        store = self.context.store()
        visit = await posting_visit(store, request, self.context.config.issuer)
        fields = await read_form(request)
        if not csrf_matches(one(fields, "csrf"), visit.csrf):
            raise OAuthError(403, "bad_csrf")
        if not visit.signed_in:
            raise OAuthError(403, "sign_in_required")
        if set(fields) != {"csrf"}:
            raise OAuthError(400, "malformed_form")
        ledger = self._ledger()
        found = await self._read(ledger, pid)
        if isinstance(found, Refused):
            return refusal_page(found.reason, self.context.config.mail_from)
        declined = ApprovalRefused(mode="passkey", reason="declined")
        changed = await self._record(ledger, found, declined)
        if changed is not None:
            return refusal_page(changed.reason, self.context.config.mail_from)
        log.info("send_declined", pid=pid, mode="passkey")
        return see_other(f"/oauth/approve/{pid}")

    async def _ceremony_visit(
        self, request: web.Request, store: OAuthStore, rule: BudgetRule
    ) -> Visit:
        """The signed-in session of a ceremony POST (same origin, CSRF header), budget spent."""
        visit = await posting_visit(store, request, self.context.config.issuer)
        if not csrf_matches(header_csrf(request), visit.csrf):
            raise OAuthError(403, "bad_csrf")
        if not visit.signed_in:
            raise OAuthError(401, "sign_in_required")
        await spend(store, rule, visit.session.handle)
        return visit

    def _ledger(self) -> SendLedger:
        ledger = self.ledger_of()
        if ledger is None:
            raise OAuthError(503, "sending_unavailable")
        return ledger

    async def _read(self, ledger: SendLedger, pid: str) -> Approvable | Refused:
        try:
            return await read_preparation(ledger.store, pid, self.owner)
        except LedgerUnavailable:
            raise OAuthError(503, "sending_unavailable") from None

    async def _record(
        self, ledger: SendLedger, found: Approvable, data: EventData
    ) -> Refused | None:
        """Append after the head that was read (None); a refused append is judged by a fresh
        read: why it can no longer be approved, or 503 when nothing changed (a recorded
        rollback halt)."""
        try:
            outcome = await ledger.store.append(
                found.pid, found.head, data, actor=ledger.actor, eid=new_id()
            )
        except LedgerUnavailable:
            raise OAuthError(503, "sending_unavailable") from None
        if outcome.result in ("appended", "duplicate"):
            return None
        again = await self._read(ledger, found.pid)
        if isinstance(again, Refused):
            return again
        raise OAuthError(503, "sending_unavailable")


def _approvable(found: Approvable | Refused) -> Approvable:
    if isinstance(found, Refused):
        status, error = REFUSALS[found.reason]
        raise OAuthError(status, error)
    return found
