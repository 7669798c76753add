"""Test signing keys, their JWKS document, and a minter of access tokens and raw forgeries.

Well-formed tokens are minted by joserfc, an implementation independent of ours. Forgeries
need bytes no JOSE library will write (duplicate members, padding, exponent numbers), so
`Minter.raw` assembles the parts by hand and signs the exact signing input with cryptography.
"""

from __future__ import annotations

import base64
import enum
import functools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from service.auth.resource.jwks import PublicKey, parse_jwks
from service.auth.resource.jwt import TokenRejected, TokenRules, parse_token, verify_signature

ISSUER = "https://login.example.com/"
RESOURCE = "https://mail.example.com/mcp"
SUBJECT = "owner-123"
SCOPE = "mail.read mail.write mail.send"
ACCEPTED = "accepted"
UNKNOWN_KID = "unknown-kid"  # the outcome of the key lookup, not of parse_token


class Absent(enum.Enum):
    """Marks a member an override removes."""

    ABSENT = "absent"


ABSENT = Absent.ABSENT


@dataclass(frozen=True)
class SigningKey:
    """A private test key: its kid, the algorithm it signs with, and the joserfc key."""

    kid: str
    alg: str
    jwk: RSAKey | ECKey = field(repr=False)

    def public_jwk(self) -> dict[str, Any]:
        """Return the public JWK members, with `alg` and `use` as an issuer would publish."""
        return {**self.jwk.as_dict(private=False), "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        """Return the public key as PEM (the HMAC secret of the key-confusion forgery)."""
        return self.jwk.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, signing_input: bytes, digest: hashes.HashAlgorithm | None = None) -> bytes:
        """Sign with this key as JOSE does: PKCS#1 v1.5 for RSA, raw r||s for P-256."""
        private = self.jwk.private_key
        if isinstance(private, rsa.RSAPrivateKey):
            return private.sign(signing_input, padding.PKCS1v15(), digest or hashes.SHA256())
        assert isinstance(private, ec.EllipticCurvePrivateKey)
        r, s = decode_dss_signature(private.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")


@functools.cache
def rsa_key(kid: str = "key-1") -> SigningKey:
    """Return a 2048-bit RSA key (RS256), one per kid for the session."""
    return SigningKey(kid, "RS256", RSAKey.generate_key(2048, {"kid": kid}, private=True))


@functools.cache
def ec_key(kid: str = "key-2") -> SigningKey:
    """Return a P-256 key (ES256), one per kid for the session."""
    return SigningKey(kid, "ES256", ECKey.generate_key("P-256", {"kid": kid}, private=True))


def outsider_key() -> SigningKey:
    """Return a key that is in no JWKS document the minter publishes."""
    return ec_key("key-9")


def jwks_document(keys: Sequence[SigningKey]) -> bytes:
    """Serialise the public halves of `keys` as a JWKS document."""
    return json.dumps({"keys": [key.public_jwk() for key in keys]}).encode("utf-8")


def b64url(data: bytes) -> str:
    """Encode canonical unpadded base64url."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def compact(value: Mapping[str, Any]) -> bytes:
    """Serialise a JSON object without spaces."""
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def with_member(document: bytes, member: str) -> bytes:
    """Append the raw JSON text `"name":value` as a last member of an object document."""
    assert document.endswith(b"}")
    return document[:-1] + b"," + member.encode("utf-8") + b"}"


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Apply overrides to a copy of base; an ABSENT value removes the member."""
    result = {**base, **overrides}
    return {name: value for name, value in result.items() if value is not ABSENT}


@dataclass
class Minter:
    """Mints tokens for one issuer, resource, subject and clock, signed by its published keys."""

    now: int = field(default_factory=lambda: int(time.time()))
    issuer: str = ISSUER
    resource: str = RESOURCE
    subject: str = SUBJECT
    keys: tuple[SigningKey, ...] = field(default_factory=lambda: (rsa_key(), ec_key()))

    @property
    def rules(self) -> TokenRules:
        """Return the TokenRules a resource server configured for this minter would use."""
        return TokenRules(self.issuer, self.resource, frozenset({self.subject}))

    @property
    def rsa(self) -> SigningKey:
        """Return the published RSA key."""
        return next(key for key in self.keys if key.alg == "RS256")

    @property
    def ec(self) -> SigningKey:
        """Return the published P-256 key."""
        return next(key for key in self.keys if key.alg == "ES256")

    def jwks(self) -> bytes:
        """Return the JWKS document of the published keys."""
        return jwks_document(self.keys)

    def header(self, key: SigningKey | None = None, **overrides: Any) -> dict[str, Any]:
        """Return the default header for `key` (RSA by default) with overrides applied."""
        key = key or self.rsa
        return merged({"alg": key.alg, "kid": key.kid, "typ": "at+jwt"}, overrides)

    def claims(self, **overrides: Any) -> dict[str, Any]:
        """Return the default claims (valid for an hour) with overrides applied."""
        defaults = {
            "iss": self.issuer,
            "aud": self.resource,
            "sub": self.subject,
            "exp": self.now + 3600,
            "iat": self.now - 60,
            "nbf": self.now,
            "scope": SCOPE,
        }
        return merged(defaults, overrides)

    def token(
        self,
        key: SigningKey | None = None,
        *,
        header: Mapping[str, Any] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> str:
        """Mint a well-formed token with joserfc from header and claim overrides."""
        key = key or self.rsa
        full_header = self.header(key, **(header or {}))
        full_claims = self.claims(**(claims or {}))
        algorithms = [full_header.get("alg", key.alg)]
        return jwt.encode(full_header, full_claims, key.jwk, algorithms, default_type=None)

    def raw(
        self,
        header: bytes | Mapping[str, Any],
        payload: bytes | Mapping[str, Any],
        key: SigningKey | None = None,
    ) -> str:
        """Assemble a token from exact header and payload bytes (or objects), signed by `key`."""
        header_part = b64url(header if isinstance(header, bytes) else compact(header))
        payload_part = b64url(payload if isinstance(payload, bytes) else compact(payload))
        return self.signed(header_part, payload_part, key)

    def signed(self, header_part: str, payload_part: str, key: SigningKey | None = None) -> str:
        """Join exact encoded parts and append `key`'s signature over them, whatever they hold."""
        signing_input = f"{header_part}.{payload_part}"
        signature = (key or self.rsa).sign(signing_input.encode("ascii"))
        return f"{signing_input}.{b64url(signature)}"


def sized_token(minter: Minter, size: int) -> str:
    """Mint a well-formed RS256 token of exactly `size` bytes, padded by filler members."""
    signature_chars = len(b64url(minter.rsa.sign(b"")))
    for header_fill in range(4):  # one header byte more shifts the total when the payload can't
        header = compact(minter.header(pad="h" * header_fill))
        rest = size - len(b64url(header)) - signature_chars - 2
        base = len(compact(minter.claims(pad="")))
        for fill in range(max(0, rest * 3 // 4 - base - 4), rest * 3 // 4 - base + 4):
            if len(b64url(b"x" * (base + fill))) == rest:
                return minter.raw(header, minter.claims(pad="p" * fill))
    raise AssertionError(f"no token of {size} bytes")


def outcome(token: str, minter: Minter) -> str:
    """Run the pure chain (parse, key by kid from the minter's JWKS, verify); name the result."""
    keys: dict[str, PublicKey] = parse_jwks(minter.jwks())
    try:
        unverified = parse_token(token, minter.rules, minter.now)
        key = keys.get(unverified.kid)
        if key is None:
            return UNKNOWN_KID
        verify_signature(unverified, key)
    except TokenRejected as rejected:
        return rejected.rule
    return ACCEPTED
