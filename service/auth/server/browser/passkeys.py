"""The WebAuthn relying party: ceremony options and verification with py_webauthn.

RP ID is the issuer's host and the only accepted origin is the issuer; user verification is
required in both ceremonies, attestation is not asked for, and a ceremony lasts five minutes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
import webauthn
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from service.auth.server.store.records import Credential
from service.wire.b64url import decode_b64url, encode_b64url

CEREMONY_MS: Final = 5 * 60 * 1000
RP_NAME: Final = "Angelos"
DISPLAY_NAME: Final = "Angelos mailbox owner"
MAX_CLIENT_DATA_BYTES: Final = 4096


class AttestationResponse(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the page sends of navigator.credentials.create()'s response."""

    clientDataJSON: str  # WebAuthn's JSON member names
    attestationObject: str
    transports: tuple[str, ...] = ()


class AssertionResponse(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the page sends of navigator.credentials.get()'s response."""

    clientDataJSON: str
    authenticatorData: str
    signature: str
    userHandle: str | None = None


class NewPasskey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A created credential as the page posts it."""

    id: str
    rawId: str
    type: str
    response: AttestationResponse


class PasskeyUse(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sign-in assertion as the page posts it."""

    id: str
    rawId: str
    type: str
    response: AssertionResponse


class PasskeyRefused(Exception):
    """The authenticator's answer does not verify (wrong origin, challenge, UV, counter, key)."""


def challenge_of(client_data_json: str) -> str | None:
    """The challenge a response answers, read from its clientDataJSON (None when malformed)."""
    raw = (
        decode_b64url(client_data_json)
        if len(client_data_json) <= 2 * MAX_CLIENT_DATA_BYTES
        else None
    )
    if raw is None or len(raw) > MAX_CLIENT_DATA_BYTES:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    found = value.get("challenge") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


class RelyingParty:
    """WebAuthn for one issuer and one owner subject."""

    def __init__(self, issuer: str, subject: str) -> None:
        self.origin = issuer
        self.rp_id = urlsplit(issuer).hostname or ""
        self.user_handle = hashlib.sha256(f"angelos:owner:{subject}".encode()).digest()
        self.subject = subject

    def registration_options(self, challenge: str, existing: Sequence[Credential]) -> str:
        """The creation options (JSON) for a new passkey of the owner."""
        options = webauthn.generate_registration_options(
            rp_id=self.rp_id,
            rp_name=RP_NAME,
            user_name=self.subject,
            user_id=self.user_handle,
            user_display_name=DISPLAY_NAME,
            challenge=_bytes(challenge),
            timeout=CEREMONY_MS,
            attestation=AttestationConveyancePreference.NONE,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
            exclude_credentials=_descriptors(existing),
        )
        return webauthn.options_to_json(options)

    def authentication_options(self, challenge: str, existing: Sequence[Credential]) -> str:
        """The request options (JSON) for signing in with one of the owner's passkeys."""
        options = webauthn.generate_authentication_options(
            rp_id=self.rp_id,
            challenge=_bytes(challenge),
            timeout=CEREMONY_MS,
            allow_credentials=_descriptors(existing),
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        return webauthn.options_to_json(options)

    def verify_registration(self, created: NewPasskey, challenge: str, now: int) -> Credential:
        """Verify a new passkey (user verified) and return it as the store keeps it."""
        try:
            verified = webauthn.verify_registration_response(
                credential=_plain(created),
                expected_challenge=_bytes(challenge),
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise PasskeyRefused(type(exc).__name__) from None
        known = {t.value for t in AuthenticatorTransport}
        return Credential(
            credential_id=encode_b64url(verified.credential_id),
            public_key=encode_b64url(verified.credential_public_key),
            sign_count=verified.sign_count,
            transports=tuple(t for t in created.response.transports if t in known),
            created_unix=now,
        )

    def verify_authentication(
        self, used: PasskeyUse, challenge: str, credential: Credential
    ) -> int:
        """Verify a sign-in assertion (user verified, counter moving on); return the new count."""
        handle = used.response.userHandle
        if handle is not None and decode_b64url(handle) != self.user_handle:
            raise PasskeyRefused("user handle")
        public_key = decode_b64url(credential.public_key)
        if public_key is None:
            raise PasskeyRefused("stored key")
        try:
            verified = webauthn.verify_authentication_response(
                credential=_plain(used),
                expected_challenge=_bytes(challenge),
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                credential_public_key=public_key,
                credential_current_sign_count=credential.sign_count,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise PasskeyRefused(type(exc).__name__) from None
        return verified.new_sign_count


def _bytes(token: str) -> bytes:
    raw = decode_b64url(token)
    if raw is None:
        raise ValueError("a challenge is base64url")
    return raw


def _descriptors(credentials: Sequence[Credential]) -> list[PublicKeyCredentialDescriptor]:
    found = []
    for credential in credentials:
        raw = decode_b64url(credential.credential_id)
        if raw is not None:
            found.append(PublicKeyCredentialDescriptor(id=raw))
    return found


def _plain(value: msgspec.Struct) -> dict[str, Any]:
    plain: dict[str, Any] = msgspec.to_builtins(value)
    return plain
