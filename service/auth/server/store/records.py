"""The records the OAuth store keeps in Redis: msgspec Structs encoded as JSON, version 1.

Decoding is strict (unknown fields and other versions are refused): stored state that does not
match is corrupt and fails closed. Values that are secrets never appear here raw; see keys.py.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.scopes import Scope

Scopes = tuple[Scope, ...]


class SessionRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A browser session, stored under SHA-256 of its cookie value."""

    v: Literal[1]
    lineage: str  # random, kept across the sign-in rotation: pending consents are bound to it
    csrf: str
    created_unix: int
    authenticated_unix: int  # 0 while anonymous; never slides
    expires_unix: int  # absolute end: anonymous 10 min, authenticated 12 h after sign-in
    pending: str = ""  # the pending request ID sealed under the cookie value, or ""

    def __repr__(self) -> str:  # the CSRF value stays out of logs
        return f"SessionRecord(authenticated_unix={self.authenticated_unix}, ...)"

    @property
    def authenticated(self) -> bool:
        """Say whether the owner signed in on this session."""
        return self.authenticated_unix > 0


ChallengePurpose = Literal["bootstrap", "register", "login", "approve"]  # approve: one send


class ChallengeRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One WebAuthn ceremony, stored under SHA-256 of its challenge and bound to a session."""

    v: Literal[1]
    purpose: ChallengePurpose
    session: str  # SHA-256 of the cookie value of the session that began the ceremony
    created_unix: int
    expires_unix: int


class ConsentRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A validated authorization request, as the authorize endpoint hands it over."""

    client_id: str
    redirect_uri: str
    scopes: Scopes
    state: str
    code_challenge: str
    client_name: str = ""  # a metadata client's name as its document gave it at authorization


class PendingConsent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A validated authorization request waiting for the owner's decision."""

    v: Literal[1]
    lineage: str  # the session lineage it is bound to
    request: ConsentRequest
    resource: str
    created_unix: int
    expires_unix: int


class Grant(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A consented grant; the `grants` hash field is SHA-256 of its ID, never the ID."""

    v: Literal[1]
    subject: str
    client_id: str
    client_name: str
    resource: str
    scopes: Scopes
    created_unix: int
    expires_unix: int

    def serves(self, client_id: str, subject: str, resource: str, now: int) -> bool:
        """Tell whether this grant is unexpired and belongs to this client, subject and resource."""
        return (
            self.client_id == client_id
            and self.subject == subject
            and self.resource == resource
            and self.expires_unix > now
        )


class AuthCode(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An authorization code record, stored under SHA-256 of the code."""

    v: Literal[1]
    subject: str
    client_id: str
    redirect_uri: str
    resource: str
    scopes: Scopes
    code_challenge: str
    grant: str  # the grant's handle (SHA-256 of its ID)
    gid_sealed: str  # the grant ID sealed under the code
    created_unix: int
    expires_unix: int


class RefreshRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A refresh token record, stored under SHA-256 of the token; kept after use as a tombstone."""

    v: Literal[1]
    family: str
    grant: str
    subject: str
    client_id: str
    resource: str
    gid_sealed: str  # the grant ID sealed under this refresh token
    created_unix: int
    expires_unix: int  # the grant deadline; rotation never moves it


class FamilyRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A refresh family: which token is current, how often it rotated, whether it is revoked."""

    v: Literal[1]
    grant: str
    current: str  # SHA-256 of the active refresh token
    rotations: int
    state: Literal["active", "revoked"]


class Credential(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One enrolled passkey."""

    credential_id: str  # base64url
    public_key: str  # base64url COSE key
    sign_count: int
    transports: tuple[str, ...] = ()
    created_unix: int = 0
    last_used_unix: int = 0


class OwnerRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The mailbox owner and their passkeys (at most 8, at most 128 KiB encoded)."""

    v: Literal[1]
    subject: str
    user_handle: str  # base64url SHA-256("angelos:owner:" + subject)
    credentials: tuple[Credential, ...]
    created_unix: int


class BootstrapMarker(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The persistent marker that bootstrap enrollment happened (no second owner ever)."""

    v: Literal[1]
    token_sha256: str  # hex SHA-256 of the bootstrap token that was used
    completed_unix: int
