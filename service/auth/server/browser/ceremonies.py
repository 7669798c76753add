"""The four JSON passkey endpoints: enrolment (bootstrap or added passkey) and sign-in."""

from __future__ import annotations

import hmac
from typing import Final

import msgspec
import structlog
from aiohttp import web

from schemas.secret import Secret
from service.auth.server.bootstrap import bootstrap_token_hash
from service.auth.server.errors import OAuthError
from service.auth.server.store import (
    ANONYMOUS_BEGIN,
    ANONYMOUS_FINISH,
    PASSKEY_BEGIN,
    PASSKEY_FINISH,
    BudgetRule,
    CredentialRefused,
    OAuthStore,
)
from service.auth.server.store.records import ChallengePurpose, OwnerRecord
from service.wire.b64url import decode_b64url

from .endpoint import BrowserContext
from .guard import csrf_matches, header_csrf, read_json
from .passkeys import NewPasskey, PasskeyRefused, PasskeyUse, challenge_of
from .session import Visit, posting_visit, recently_signed_in, set_cookie, spend, spend_all

MIN_TOKEN_BYTES: Final = 32
MAX_TOKEN_BYTES: Final = 64
MAX_TOKEN_CHARS: Final = 86  # unpadded base64url of 64 bytes


class RegisterBegin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """register/begin: the bootstrap token for the first passkey, nothing for a later one."""

    bootstrap_token: str | None = None


class RegisterFinish(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """register/finish: the created credential (and the bootstrap token again)."""

    credential: NewPasskey
    bootstrap_token: str | None = None


class LoginBegin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """login/begin takes an empty object."""


class LoginFinish(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """login/finish: the assertion."""

    credential: PasskeyUse


def bootstrap_token_ok(presented: str | None, expected: Secret | None) -> bool:
    """Whether a token is strict base64url of 32..64 bytes whose SHA-256 is the configured one."""
    if presented is None or expected is None or len(presented) > MAX_TOKEN_CHARS:
        return False
    raw = decode_b64url(presented)
    if raw is None or not MIN_TOKEN_BYTES <= len(raw) <= MAX_TOKEN_BYTES:
        return False
    digest = bootstrap_token_hash(presented).encode("ascii")
    return hmac.compare_digest(digest, expected.reveal().encode("ascii"))


# Security events: the event and the refusal's rule only, never a cookie, challenge, credential
# ID or token. A refusal before the visit's budget is spent is not logged (no flood of lines).
log = structlog.get_logger("angelos.oauth")


class Ceremonies:
    """The passkey endpoints of one browser flow."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context

    async def _visit(self, request: web.Request, store: OAuthStore, rule: BudgetRule) -> Visit:
        """The checked visit of a ceremony POST, its budget spent: a stored session's own, an
        anonymous visitor's per source address and within the cap of all anonymous ones."""
        context = self.context
        visit = await posting_visit(store, request, context.config.issuer, context.visitors)
        if not csrf_matches(header_csrf(request), visit.csrf):
            raise OAuthError(403, "bad_csrf")
        if visit.visitor is None:
            await spend(store, rule, visit.session.handle)
        else:
            everyone = ANONYMOUS_BEGIN if rule == PASSKEY_BEGIN else ANONYMOUS_FINISH
            source = f"source:{context.source(request)}"
            await spend_all(store, [(rule, source), (everyone, "")])
        return visit

    async def register_begin(self, request: web.Request) -> web.StreamResponse:
        """Start a passkey registration: the first one with the bootstrap token, later ones
        only on a session signed in within five minutes."""
        store = self.context.store()
        visit = await self._visit(request, store, PASSKEY_BEGIN)
        body = await read_json(request, RegisterBegin)
        owner = await store.owner.load()
        purpose = await self._purpose(store, visit, owner, body.bootstrap_token)
        existing = () if owner is None else owner.credentials
        challenge = await store.sessions.put_challenge(visit.session, purpose)
        options = self.context.relying_party.registration_options(challenge.reveal(), existing)
        return web.Response(text=options, content_type="application/json")

    async def register_finish(self, request: web.Request) -> web.StreamResponse:
        """Verify the new passkey and enrol it (atomically with the owner, the first time)."""
        store = self.context.store()
        visit = await self._visit(request, store, PASSKEY_FINISH)
        try:
            purpose = await self._enrol(request, store, visit)
        except OAuthError as refused:
            log.warning("passkey_enrolment_refused", rule=refused.error)
            raise
        log.info("passkey_enrolled", purpose=purpose)
        return web.json_response({"ok": True})

    async def _enrol(
        self, request: web.Request, store: OAuthStore, visit: Visit
    ) -> ChallengePurpose:
        body = await read_json(request, RegisterFinish)
        challenge = challenge_of(body.credential.response.clientDataJSON)
        if challenge is None:
            raise OAuthError(400, "malformed_request")
        owner = await store.owner.load()
        purpose = await self._purpose(store, visit, owner, body.bootstrap_token)
        if await store.sessions.take_challenge(challenge, visit.session, purpose) is None:
            raise OAuthError(400, "ceremony_expired")
        try:
            credential = self.context.relying_party.verify_registration(
                body.credential, challenge, self.context.now()
            )
        except PasskeyRefused:
            raise OAuthError(400, "passkey_refused") from None
        if purpose == "bootstrap":
            assert body.bootstrap_token is not None
            enrolled = await store.owner.complete_bootstrap(
                Secret(body.bootstrap_token), credential
            )
            if enrolled is None:
                raise OAuthError(409, "enrollment_refused")
        else:
            try:
                await store.owner.add_credential(credential)
            except CredentialRefused:
                raise OAuthError(409, "passkey_not_added") from None
        return purpose

    async def _purpose(
        self, store: OAuthStore, visit: Visit, owner: OwnerRecord | None, token: str | None
    ) -> ChallengePurpose:
        """Which registration this is, or why it may not happen."""
        if token is not None:  # a bootstrap attempt
            if owner is not None or await store.owner.bootstrap_disabled():
                if not visit.signed_in:
                    raise OAuthError(401, "sign_in_required")
                raise OAuthError(403, "enrollment_disabled")
            if not bootstrap_token_ok(token, self.context.config.bootstrap_hash):
                raise OAuthError(403, "bootstrap_refused")
            return "bootstrap"
        if owner is None:
            if await store.owner.bootstrap_disabled():
                raise OAuthError(403, "enrollment_disabled")
            raise OAuthError(403, "bootstrap_refused")
        if not recently_signed_in(visit, self.context.now()):
            raise OAuthError(401, "sign_in_required")
        return "register"

    async def login_begin(self, request: web.Request) -> web.StreamResponse:
        """Start a passkey sign-in for the owner's passkeys."""
        store = self.context.store()
        visit = await self._visit(request, store, PASSKEY_BEGIN)
        await read_json(request, LoginBegin)  # an empty object, checked
        owner = await store.owner.load()
        if owner is None:
            raise OAuthError(409, "no_owner")
        challenge = await store.sessions.put_challenge(visit.session, "login")
        options = self.context.relying_party.authentication_options(
            challenge.reveal(), owner.credentials
        )
        return web.Response(text=options, content_type="application/json")

    async def login_finish(self, request: web.Request) -> web.StreamResponse:
        """Verify the assertion, rotate the session to a signed-in one, say where to go next."""
        store = self.context.store()
        visit = await self._visit(request, store, PASSKEY_FINISH)
        try:
            answer = await self._sign_in(request, store, visit)
        except OAuthError as refused:
            log.warning("sign_in_failed", rule=refused.error)
            raise
        log.info("signed_in")
        return answer

    async def _sign_in(
        self, request: web.Request, store: OAuthStore, visit: Visit
    ) -> web.StreamResponse:
        body = await read_json(request, LoginFinish)
        used = body.credential
        challenge = challenge_of(used.response.clientDataJSON)
        if challenge is None:
            raise OAuthError(400, "malformed_request")
        if await store.sessions.take_challenge(challenge, visit.session, "login") is None:
            raise OAuthError(400, "ceremony_expired")
        owner = await store.owner.load()
        found = (
            []
            if owner is None
            else [c for c in owner.credentials if c.credential_id == used.rawId == used.id]
        )
        if not found:
            raise OAuthError(400, "passkey_refused")
        try:
            count = self.context.relying_party.verify_authentication(used, challenge, found[0])
        except PasskeyRefused:
            raise OAuthError(400, "passkey_refused") from None
        if not await store.owner.update_sign_count(found[0].credential_id, count):
            raise OAuthError(400, "passkey_refused")
        if visit.visitor is not None:  # the first thing stored for this visitor
            signed = await store.sessions.sign_in(visit.visitor.pending)
        else:
            rotated = await store.sessions.rotate_on_sign_in(visit.cookie, visit.session)
            if rotated is None:
                raise OAuthError(409, "session_changed")
            signed = rotated
        pending = signed.pending_request
        next_url = (
            "/oauth/grants" if pending is None else f"/oauth/consent?request={pending.reveal()}"
        )
        answer = web.json_response({"next": next_url})
        set_cookie(answer, signed.cookie)
        return answer
