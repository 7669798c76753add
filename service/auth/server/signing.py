"""The first-party issuer's token signer and its published key set (keys load in configuration)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from service.auth.resource.profile import AccessTokenClaims
from service.config import FirstPartyConfig
from service.config.signing_keys import VerificationKey
from service.wire.b64url import encode_b64url

_COORDINATE_BYTES = 32


def _coordinates(key: ec.EllipticCurvePublicKey) -> tuple[str, str]:
    numbers = key.public_numbers()
    return (
        encode_b64url(numbers.x.to_bytes(_COORDINATE_BYTES, "big")),
        encode_b64url(numbers.y.to_bytes(_COORDINATE_BYTES, "big")),
    )


def public_jwk(kid: str, key: ec.EllipticCurvePublicKey) -> dict[str, str]:
    """The key's JWK as the key set publishes it, members in the published order."""
    x, y = _coordinates(key)
    return {"kty": "EC", "use": "sig", "alg": "ES256", "kid": kid, "crv": "P-256", "x": x, "y": y}


def public_pem(key: ec.EllipticCurvePrivateKey) -> str:
    """The key's public half as a `PUBLIC KEY` block, the form retiring keys are listed in."""
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )


class Signer:
    """Signs access tokens with the active key and publishes it beside the retiring ones."""

    __slots__ = ("_key", "_retiring", "kid")

    def __init__(
        self,
        key: ec.EllipticCurvePrivateKey,
        kid: str,
        retiring: Sequence[VerificationKey] = (),
    ) -> None:
        self._key = key
        self.kid = kid
        self._retiring = tuple(sorted(retiring, key=lambda entry: entry.kid))

    def __repr__(self) -> str:
        return f"Signer(kid={self.kid!r}, retiring={[entry.kid for entry in self._retiring]!r})"

    @classmethod
    def of(cls, config: FirstPartyConfig) -> Signer:
        """The signer of a configured issuer: its active key and its retiring keys."""
        return cls(config.signing_key, config.signing_kid, config.verification_keys)

    def sign_access_token(self, claims: AccessTokenClaims | Mapping[str, Any]) -> str:
        """Return the compact JWS of claims: ES256 under the active kid, typed at+jwt."""
        header = msgspec.json.encode({"alg": "ES256", "kid": self.kid, "typ": "at+jwt"})
        signing_input = f"{encode_b64url(header)}.{encode_b64url(msgspec.json.encode(claims))}"
        der = self._key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        raw = r.to_bytes(_COORDINATE_BYTES, "big") + s.to_bytes(_COORDINATE_BYTES, "big")
        return f"{signing_input}.{encode_b64url(raw)}"

    def jwks_document(self) -> bytes:
        """The /oauth/jwks.json body: the active key, then the retiring keys sorted by kid."""
        keys = [public_jwk(self.kid, self._key.public_key())]
        keys += [public_jwk(entry.kid, entry.key) for entry in self._retiring]
        return msgspec.json.encode({"keys": keys})


def new_signing_key() -> tuple[str, str]:
    """Return a fresh P-256 key as unencrypted PKCS#8 PEM, and a suggested kid for it."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")
    return pem, f"es256-{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(3)}"
