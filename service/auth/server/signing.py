"""The ES256 signing key of the first-party issuer, its retiring keys, and the published key set.

The key pair comes from the operator's secret store (`angelos oauth signing-key` makes one);
nothing here generates a key at startup. A PEM is accepted only in the one strict shape
docs/configuration.md describes, and a refusal names a rule, never key material.
"""

from __future__ import annotations

import base64
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from service.auth.profile import AccessTokenClaims

MAX_PEM_BYTES = 16384
MAX_VERIFICATION_KEYS = 4
_COORDINATE_BYTES = 32
_PRIVATE_LABELS = ("PRIVATE KEY", "EC PRIVATE KEY")
_PUBLIC_LABELS = ("PUBLIC KEY",)
# One block: BEGIN line, base64 lines (no RFC 1421 headers), the matching END line.
_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n((?:[A-Za-z0-9+/=]+\r?\n)+)-----END \1-----", re.ASCII
)
_PEM_WHITESPACE = " \t\r\n"


class KeyRefused(ValueError):
    """A PEM broke a rule; the message is the rule in words, never key material."""


class VerificationKey(msgspec.Struct, frozen=True):
    """A retiring public key, still published so tokens it signed verify until they expire."""

    kid: str
    key: Any  # cryptography's EllipticCurvePublicKey on P-256


def load_signing_key(pem: str) -> ec.EllipticCurvePrivateKey:
    """Parse the active private key: one unencrypted PKCS#8 or SEC1 block holding a P-256 key."""
    label, block = _one_block(pem, _PRIVATE_LABELS)
    loaded: object = None
    rule = ""
    try:
        loaded = serialization.load_pem_private_key(block, password=None)
    except TypeError:  # "password was not given but private key is encrypted"
        rule = "is encrypted; store the key unencrypted in the secret manager"
    except (ValueError, UnsupportedAlgorithm):
        rule = f"is not a valid {label} (bad encoding, scalar or public point)"
    if rule:
        raise KeyRefused(rule)  # outside the except block: the library's message stays out
    if not isinstance(loaded, ec.EllipticCurvePrivateKey):
        raise KeyRefused("must be an EC key on P-256")
    if not isinstance(loaded.curve, ec.SECP256R1):
        raise KeyRefused("must be on the P-256 curve")
    return loaded


def load_verification_key(pem: str) -> ec.EllipticCurvePublicKey:
    """Parse a retiring public key: one `PUBLIC KEY` (SubjectPublicKeyInfo) block on P-256."""
    _, block = _one_block(pem, _PUBLIC_LABELS)
    loaded: object = None
    try:
        loaded = serialization.load_pem_public_key(block)
    except (ValueError, UnsupportedAlgorithm):
        loaded = None
    if loaded is None:
        raise KeyRefused("is not a valid PUBLIC KEY")
    if not isinstance(loaded, ec.EllipticCurvePublicKey):
        raise KeyRefused("must be an EC key on P-256")
    if not isinstance(loaded.curve, ec.SECP256R1):
        raise KeyRefused("must be on the P-256 curve")
    return loaded


def _one_block(pem: str, labels: tuple[str, ...]) -> tuple[str, bytes]:
    """Return (label, block bytes) of the one PEM block pem holds, or raise KeyRefused."""
    if not pem.strip(_PEM_WHITESPACE):
        raise KeyRefused("is empty")
    if len(pem.encode("utf-8", "surrogatepass")) > MAX_PEM_BYTES:
        raise KeyRefused(f"must be at most {MAX_PEM_BYTES} bytes")
    if pem.count("-----BEGIN ") != 1:
        raise KeyRefused("must hold exactly one PEM block")
    if "ENCRYPTED" in pem:  # PKCS#8 "ENCRYPTED PRIVATE KEY", or SEC1's Proc-Type header
        raise KeyRefused("is encrypted; store the key unencrypted in the secret manager")
    match = _BLOCK.fullmatch(pem.strip(_PEM_WHITESPACE))
    if match is None:
        raise KeyRefused(
            "must be one PEM block with real line breaks, no headers and nothing around it"
        )
    label = match.group(1)
    if label not in labels:
        raise KeyRefused(f"must be a {' or '.join(labels)} block")
    return label, match.group(0).encode("ascii")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _coordinates(key: ec.EllipticCurvePublicKey) -> tuple[str, str]:
    numbers = key.public_numbers()
    return (
        _b64url(numbers.x.to_bytes(_COORDINATE_BYTES, "big")),
        _b64url(numbers.y.to_bytes(_COORDINATE_BYTES, "big")),
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

    def sign_access_token(self, claims: AccessTokenClaims | Mapping[str, Any]) -> str:
        """Return the compact JWS of claims: ES256 under the active kid, typed at+jwt."""
        header = msgspec.json.encode({"alg": "ES256", "kid": self.kid, "typ": "at+jwt"})
        signing_input = f"{_b64url(header)}.{_b64url(msgspec.json.encode(claims))}"
        der = self._key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        raw = r.to_bytes(_COORDINATE_BYTES, "big") + s.to_bytes(_COORDINATE_BYTES, "big")
        return f"{signing_input}.{_b64url(raw)}"

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
