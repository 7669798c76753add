"""Strict JWKS parsing, hand-written because PyJWT and joserfc accept private members in key sets.

Both libraries take a set that carries private key material (measured); here such a set, a
repeated kid or a malformed RSA/EC key makes the whole document invalid, and keys this server
cannot use for RS256/ES256 verification are skipped.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from schemas.strict_json import StrictJsonError, parse_object
from service.wire.b64url import decode_b64url

Alg = Literal["RS256", "ES256"]

MAX_JWKS_BYTES = 256 * 1024
MAX_KEYS = 32
MAX_KID_BYTES = 256
PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")
MIN_RSA_BITS = 2048
MAX_RSA_MODULUS_BYTES = 1024
MAX_RSA_EXPONENT = 2**31 - 1


class PublicKey(msgspec.Struct, frozen=True):
    """A verification key from the set: its kid, the one algorithm it serves, the key itself."""

    kid: str
    alg: Alg
    key: Any  # cryptography's RSAPublicKey or EllipticCurvePublicKey


class JwksError(ValueError):
    """A key set broke a rule; the message is the rule's short name only."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def parse_jwks(document: bytes) -> dict[str, PublicKey]:
    """Parse a JWKS document into its usable keys by kid, or raise JwksError for the whole set."""
    if len(document) > MAX_JWKS_BYTES:
        raise JwksError("size")
    rule = ""
    try:
        root = parse_object(document)
    except StrictJsonError as error:
        rule = error.rule
    if rule:
        raise JwksError(rule)  # outside the except block: no chained context
    entries = root.get("keys")
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_KEYS:
        raise JwksError("keys")
    usable: dict[str, PublicKey] = {}
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict):
            raise JwksError("entry")
        kid = entry.get("kid")
        if not isinstance(kid, str) or not 1 <= len(kid.encode("utf-8")) <= MAX_KID_BYTES:
            raise JwksError("kid")
        if kid in seen:
            raise JwksError("duplicate-kid")
        seen.add(kid)
        key = _entry_key(kid, entry)
        if key is not None:
            usable[kid] = key
    if not usable:
        raise JwksError("no-usable-key")
    return usable


def _entry_key(kid: str, entry: dict[str, Any]) -> PublicKey | None:
    """Return the entry's key, None when it is not for RS256/ES256 verification; raise if bad."""
    if any(member in entry for member in PRIVATE_MEMBERS):
        raise JwksError("private-member")
    if "use" in entry:
        if not isinstance(entry["use"], str):
            raise JwksError("use")
        if entry["use"] != "sig":
            return None
    if "key_ops" in entry and entry["key_ops"] != ["verify"]:
        return None
    alg = entry.get("alg")
    if "alg" in entry and not isinstance(alg, str):
        raise JwksError("alg")
    kty = entry.get("kty")
    if kty == "RSA":
        return None if alg not in (None, "RS256") else PublicKey(kid, "RS256", _rsa_key(entry))
    if kty == "EC":
        if entry.get("crv") != "P-256" or alg not in (None, "ES256"):
            return None
        return PublicKey(kid, "ES256", _ec_key(entry))
    return None  # OKP and any other key type: not an algorithm this server verifies


def _member_bytes(entry: dict[str, Any], name: str, rule: str) -> bytes:
    value = entry.get(name)
    data = decode_b64url(value) if isinstance(value, str) else None
    if data is None:
        raise JwksError(rule)
    return data


def _rsa_key(entry: dict[str, Any]) -> rsa.RSAPublicKey:
    n_bytes = _member_bytes(entry, "n", "rsa-n")
    e_bytes = _member_bytes(entry, "e", "rsa-e")
    if not 1 <= len(n_bytes) <= MAX_RSA_MODULUS_BYTES or n_bytes[0] == 0:
        raise JwksError("rsa-n")
    if not 1 <= len(e_bytes) <= 4 or e_bytes[0] == 0:
        raise JwksError("rsa-e")
    n = int.from_bytes(n_bytes, "big")
    e = int.from_bytes(e_bytes, "big")
    if n.bit_length() < MIN_RSA_BITS or n % 2 == 0:
        raise JwksError("rsa-n")
    if not 3 <= e <= MAX_RSA_EXPONENT or e % 2 == 0:
        raise JwksError("rsa-e")
    try:
        return rsa.RSAPublicNumbers(e, n).public_key()
    except ValueError:
        pass
    raise JwksError("rsa-key")


def _ec_key(entry: dict[str, Any]) -> ec.EllipticCurvePublicKey:
    x = _member_bytes(entry, "x", "ec-point")
    y = _member_bytes(entry, "y", "ec-point")
    if len(x) != 32 or len(y) != 32:
        raise JwksError("ec-point")
    numbers = ec.EllipticCurvePublicNumbers(
        int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1()
    )
    try:
        return numbers.public_key()
    except ValueError:  # the point is not on P-256
        pass
    raise JwksError("ec-point")
