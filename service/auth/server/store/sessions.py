"""Browser sessions, WebAuthn challenges and pending consents.

Expiry here uses the store clock: each record carries its absolute end, and its Redis TTL is set
from the same numbers, so a record is refused by whichever comes first.
"""

from __future__ import annotations

import secrets

import msgspec

from schemas.secret import Secret

from ._core import (
    ANONYMOUS_LIFETIME_S,
    CHALLENGE_LIFETIME_S,
    CONSENT_LIFETIME_S,
    SESSION_IDLE_S,
    SESSION_LIFETIME_S,
    Presented,
    StoreCore,
    as_bytes,
    decode,
    encode,
    is_token,
    reveal,
)
from .errors import StoreCorrupt
from .keys import new_token, seal, sha256_hex, unseal
from .records import (
    ChallengePurpose,
    ChallengeRecord,
    ConsentRequest,
    PendingConsent,
    SessionRecord,
)

_PENDING = "pending-consent"


class SessionView(msgspec.Struct, frozen=True):
    """A loaded session: its handle (SHA-256 of the cookie), record and stored bytes."""

    handle: str
    record: SessionRecord
    raw: bytes

    def __repr__(self) -> str:  # raw holds the CSRF value
        return f"SessionView(authenticated={self.record.authenticated})"


class SignedIn(msgspec.Struct, frozen=True):
    """The result of a sign-in rotation: the new cookie, its session and any pending request."""

    cookie: Secret
    session: SessionView
    pending_request: Secret | None


class SessionStore:
    """Sessions, challenges and consents."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    # ---------------------------------------------------------------------------- sessions

    async def create(self) -> tuple[Secret, SessionView]:
        """Create an anonymous session (10 min, no sliding); return its cookie value and view.

        The browser flow no longer creates these (a visitor's state rides in its sealed cookie
        and `sign_in` stores its first record); one made before still signs in by rotation."""
        now = self.core.now()
        record = SessionRecord(
            v=1,
            lineage=secrets.token_hex(32),
            csrf=new_token(),
            created_unix=now,
            authenticated_unix=0,
            expires_unix=now + ANONYMOUS_LIFETIME_S,
        )
        cookie = new_token()
        raw = encode(record)
        key = self.core.bucket_key("session", cookie)
        created = await self.core.call(
            self.core.client.set(key, raw, px=ANONYMOUS_LIFETIME_S * 1000, nx=True)
        )
        if not created:
            raise StoreCorrupt("a fresh session key already existed")
        return Secret(cookie), SessionView(sha256_hex(cookie), record, raw)

    async def load(self, cookie: Presented) -> SessionView | None:
        """Return the live session for a cookie value, or None (unknown, malformed or expired)."""
        value = reveal(cookie)
        if not is_token(value):
            return None
        key = self.core.bucket_key("session", value)
        stored = await self.core.call(self.core.client.get(key))
        if stored is None:
            return None
        raw = as_bytes(stored)
        record = decode(raw, SessionRecord)
        if self.core.now() >= record.expires_unix:
            await self.core.call(self.core.client.delete(key))
            return None
        return SessionView(sha256_hex(value), record, raw)

    async def touch(self, session: SessionView) -> bool:
        """Slide a signed-in session's idle window (30 min, never past its 12 h end).

        Anonymous sessions do not slide. Returns False when the session is gone or over.
        """
        key = self.core.keys.bucket("session", session.handle)
        if not session.record.authenticated:
            return bool(await self.core.call(self.core.client.exists(key)))
        remaining = min(SESSION_IDLE_S, session.record.expires_unix - self.core.now())
        if remaining <= 0:
            await self.core.call(self.core.client.delete(key))
            return False
        return bool(await self.core.call(self.core.client.pexpire(key, remaining * 1000)))

    async def rotate_on_sign_in(self, cookie: Presented, session: SessionView) -> SignedIn | None:
        """Consume the session and create a signed-in one (new cookie, new CSRF) atomically.

        Returns None when the session changed or disappeared since it was loaded (a second
        sign-in raced this one). The pending request carries over to the new session.
        """
        old_cookie = reveal(cookie)
        if sha256_hex(old_cookie) != session.handle:
            raise ValueError("the cookie does not belong to this session")
        pending = self._pending(old_cookie, session.record)
        now = self.core.now()
        new_cookie = new_token()
        record = SessionRecord(
            v=1,
            lineage=session.record.lineage,
            csrf=new_token(),
            created_unix=now,
            authenticated_unix=now,
            expires_unix=now + SESSION_LIFETIME_S,
            pending="" if pending is None else seal(pending, purpose=_PENDING, key=new_cookie),
        )
        raw = encode(record)
        status, _ = await self.core.script_status(
            "rotate_session",
            [
                self.core.keys.bucket("session", session.handle),
                self.core.bucket_key("session", new_cookie),
            ],
            [session.raw, raw, SESSION_IDLE_S * 1000],
        )
        if status != "ok":
            return None
        view = SessionView(sha256_hex(new_cookie), record, raw)
        return SignedIn(Secret(new_cookie), view, None if pending is None else Secret(pending))

    async def sign_in(self, pending: ConsentRequest | None) -> SignedIn:
        """Create a signed-in session for a visitor that had nothing stored (a new lineage),
        with its pending request as a consent of that lineage, both in one step."""
        now = self.core.now()
        cookie = new_token()
        lineage = secrets.token_hex(32)
        request_id = None if pending is None else new_token()
        record = SessionRecord(
            v=1,
            lineage=lineage,
            csrf=new_token(),
            created_unix=now,
            authenticated_unix=now,
            expires_unix=now + SESSION_LIFETIME_S,
            pending="" if request_id is None else seal(request_id, purpose=_PENDING, key=cookie),
        )
        raw = encode(record)
        keys = [self.core.bucket_key("session", cookie)]
        args: list[bytes | int] = [raw, SESSION_IDLE_S * 1000]
        if pending is not None and request_id is not None:
            consent = PendingConsent(
                v=1,
                lineage=lineage,
                request=pending,
                resource=self.core.resource,
                created_unix=now,
                expires_unix=now + CONSENT_LIFETIME_S,
            )
            keys.append(self.core.bucket_key("consent", request_id))
            args += [encode(consent), CONSENT_LIFETIME_S * 1000]
        status, _ = await self.core.script_status("sign_in", keys, args)
        if status != "ok":
            raise StoreCorrupt("the sign-in script answered unexpectedly")
        view = SessionView(sha256_hex(cookie), record, raw)
        return SignedIn(Secret(cookie), view, None if request_id is None else Secret(request_id))

    async def delete(self, cookie: Presented) -> None:
        """Delete the session of a cookie value (logout); unknown values are ignored."""
        value = reveal(cookie)
        if is_token(value):
            await self.core.call(self.core.client.delete(self.core.bucket_key("session", value)))

    def pending_request(self, cookie: Presented, session: SessionView) -> Secret | None:
        """Return the pending request noted in a session, opened with its cookie value."""
        pending = self._pending(reveal(cookie), session.record)
        return None if pending is None else Secret(pending)

    @staticmethod
    def _pending(cookie: str, record: SessionRecord) -> str | None:
        if not record.pending:
            return None
        return unseal(record.pending, purpose=_PENDING, key=cookie)

    # -------------------------------------------------------------------------- challenges

    async def put_challenge(self, session: SessionView, purpose: ChallengePurpose) -> Secret:
        """Start a WebAuthn ceremony bound to the session; return the challenge (5 min)."""
        challenge = new_token()
        now = self.core.now()
        record = ChallengeRecord(
            v=1,
            purpose=purpose,
            session=session.handle,
            created_unix=now,
            expires_unix=now + CHALLENGE_LIFETIME_S,
        )
        key = self.core.bucket_key("challenge", challenge)
        created = await self.core.call(
            self.core.client.set(key, encode(record), px=CHALLENGE_LIFETIME_S * 1000, nx=True)
        )
        if not created:
            raise StoreCorrupt("a fresh challenge key already existed")
        return Secret(challenge)

    async def take_challenge(
        self, challenge: Presented, session: SessionView, purpose: ChallengePurpose
    ) -> ChallengeRecord | None:
        """Consume a challenge (one use); return it only if it is this session's, for purpose."""
        value = reveal(challenge)
        if not is_token(value):
            return None
        stored = await self.core.call(
            self.core.client.getdel(self.core.bucket_key("challenge", value))
        )
        if stored is None:
            return None
        record = decode(stored, ChallengeRecord)
        if (
            record.session != session.handle
            or record.purpose != purpose
            or self.core.now() >= record.expires_unix
        ):
            return None
        return record

    # ---------------------------------------------------------------------------- consents

    async def put_consent(
        self, cookie: Presented, session: SessionView, request: ConsentRequest
    ) -> Secret | None:
        """Store a validated request for the owner's decision (10 min) and note it in the session.

        Returns the request ID, or None when the session changed since it was loaded.
        """
        session_cookie = reveal(cookie)
        if sha256_hex(session_cookie) != session.handle:
            raise ValueError("the cookie does not belong to this session")
        now = self.core.now()
        request_id = new_token()
        pending = PendingConsent(
            v=1,
            lineage=session.record.lineage,
            request=request,
            resource=self.core.resource,
            created_unix=now,
            expires_unix=now + CONSENT_LIFETIME_S,
        )
        noted = msgspec.structs.replace(
            session.record, pending=seal(request_id, purpose=_PENDING, key=session_cookie)
        )
        status, _ = await self.core.script_status(
            "put_consent",
            [
                self.core.keys.bucket("session", session.handle),
                self.core.bucket_key("consent", request_id),
            ],
            [session.raw, encode(noted), encode(pending), CONSENT_LIFETIME_S * 1000],
        )
        return Secret(request_id) if status == "ok" else None

    async def peek_consent(
        self, request_id: Presented, session: SessionView
    ) -> PendingConsent | None:
        """Return a pending consent of this session's lineage without consuming it."""
        value = reveal(request_id)
        if not is_token(value):
            return None
        stored = await self.core.call(self.core.client.get(self.core.bucket_key("consent", value)))
        return None if stored is None else self._own_consent(stored, session)

    async def take_consent(
        self, request_id: Presented, session: SessionView
    ) -> PendingConsent | None:
        """Consume a pending consent (a double submit gets None the second time)."""
        value = reveal(request_id)
        if not is_token(value):
            return None
        stored = await self.core.call(
            self.core.client.getdel(self.core.bucket_key("consent", value))
        )
        return None if stored is None else self._own_consent(stored, session)

    def _own_consent(self, stored: object, session: SessionView) -> PendingConsent | None:
        record = decode(stored, PendingConsent)
        if record.lineage != session.record.lineage or self.core.now() >= record.expires_unix:
            return None
        if record.resource != self.core.resource:
            raise StoreCorrupt("a pending consent names another resource")
        return record
