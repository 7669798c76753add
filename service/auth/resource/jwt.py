"""Strict JWT access-token checks, hand-written because PyJWT and joserfc are lenient.

Both libraries accept duplicate members, `jku` headers and a fractional `exp` (measured). Here
every check runs in a fixed order, cheapest first: size, shape, header, then claims, all before
any key is looked up; the signature is verified separately once the caller has the key.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any, cast

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from schemas.strict_json import StrictJsonError, parse_object
from service.auth.resource.jwks import Alg, PublicKey
from service.wire.b64url import decode_b64url

MAX_TOKEN_BYTES = 16384
MAX_HEADER_BYTES = 2048
MAX_KID_BYTES = 256
MAX_SUBJECT_BYTES = 512
MAX_AUDIENCES = 32
MAX_SCOPE_CHARS = 4096
MAX_TIME = 2**63 - 1  # the largest signed 64-bit value: a wider integer is no Unix time
ES256_SIGNATURE_BYTES = 64
# How far ahead of ours the issuer's clock may run: its iat and nbf are its "now", so a token
# minted a moment ago by an issuer 0.3 s fast names a second we have not reached. exp gets none.
CLOCK_LEAD_S = 60

ALGORITHMS: frozenset[str] = frozenset({"RS256", "ES256"})
# A token may never name a network destination, embed a key, or change how it is processed.
FORBIDDEN_HEADER_MEMBERS = ("crit", "b64", "jku", "jwk", "x5u", "zip")
TYPES = frozenset({"JWT", "at+jwt", "application/at+jwt"})

_SEPARATORS = re.compile(r"[ \t\r\n]")
# Spaces and printable ASCII except the double quote and the backslash.
_SCOPE = re.compile(r"[ !#-\[\]-~]*")
# 4/3 of the decoded limit, rounded up: a longer header part cannot decode under it.
_MAX_HEADER_PART = -(-MAX_HEADER_BYTES * 4 // 3)


class TokenRules(msgspec.Struct, frozen=True):
    """What a token must match: the configured issuer, this resource and the allowed subjects."""

    issuer: str
    resource: str
    allowed_subjects: frozenset[str]


class Claims(msgspec.Struct, frozen=True):
    """The checked claims of a token."""

    issuer: str
    subject: str
    audience: tuple[str, ...]
    audience_is_string: bool
    expires: int
    not_before: int | None
    issued_at: int | None
    scopes: tuple[str, ...]  # the whitespace split of `scope`; () when absent
    jti: str | None  # the next three are kept raw for a later first-party profile
    gid: str | None
    client_id: str | None


class UnverifiedToken(msgspec.Struct, frozen=True):
    """A token that passed every check but its signature; its repr hides the token itself."""

    kid: str
    alg: Alg
    signing_input: bytes
    signature: bytes
    claims: Claims

    def __repr__(self) -> str:
        return f"UnverifiedToken(kid=<{len(self.kid)} chars>, alg={self.alg!r})"


class TokenRejected(Exception):
    """The token is not acceptable; `rule` is a short label that never carries token text."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def parse_token(token: str, rules: TokenRules, now: int) -> UnverifiedToken:
    """Check everything but the signature, in the fixed order; raise TokenRejected at the first."""
    if not 1 <= len(token) <= MAX_TOKEN_BYTES or (
        not token.isascii() and len(token.encode("utf-8", "surrogatepass")) > MAX_TOKEN_BYTES
    ):
        raise TokenRejected("length")
    if _SEPARATORS.search(token):
        raise TokenRejected("whitespace")
    if token.count(".") != 2:
        raise TokenRejected("parts")
    header_part, payload_part, signature_part = token.split(".")
    if len(header_part) > _MAX_HEADER_PART:
        raise TokenRejected("header-size")
    header_bytes = decode_b64url(header_part)
    if header_bytes is None:
        raise TokenRejected("header-encoding")
    if len(header_bytes) > MAX_HEADER_BYTES:
        raise TokenRejected("header-size")
    header = _json(header_bytes)
    alg, kid = _check_header(header)
    payload_bytes = decode_b64url(payload_part)
    if payload_bytes is None:
        raise TokenRejected("payload-encoding")
    claims = _check_claims(_json(payload_bytes), rules, now)
    signature = decode_b64url(signature_part)
    if not signature:
        raise TokenRejected("signature-encoding")
    signing_input = f"{header_part}.{payload_part}".encode("ascii")
    return UnverifiedToken(kid, alg, signing_input, signature, claims)


def verify_signature(token: UnverifiedToken, key: PublicKey) -> None:
    """Verify the token's signature with the key its kid and alg named, or raise TokenRejected."""
    if key.kid != token.kid:
        raise TokenRejected("key-kid")
    if key.alg != token.alg:
        raise TokenRejected("key-alg")
    if token.alg == "RS256" and isinstance(key.key, rsa.RSAPublicKey):
        verified = _verified(
            lambda: key.key.verify(
                token.signature, token.signing_input, padding.PKCS1v15(), hashes.SHA256()
            )
        )
    elif token.alg == "ES256" and isinstance(key.key, ec.EllipticCurvePublicKey):
        if len(token.signature) != ES256_SIGNATURE_BYTES:
            raise TokenRejected("signature-length")
        r = int.from_bytes(token.signature[:32], "big")
        s = int.from_bytes(token.signature[32:], "big")
        der = encode_dss_signature(r, s)
        verified = _verified(
            lambda: key.key.verify(der, token.signing_input, ec.ECDSA(hashes.SHA256()))
        )
    else:
        raise TokenRejected("key-alg")  # the key's type does not serve its declared algorithm
    if not verified:
        raise TokenRejected("signature")


def _verified(verify: Callable[[], None]) -> bool:
    try:
        verify()
    except (InvalidSignature, ValueError):
        return False
    return True


def _json(data: bytes) -> dict[str, Any]:
    rule = ""
    try:
        return parse_object(data)
    except StrictJsonError as error:
        rule = error.rule
    raise TokenRejected(rule)  # outside the except block: no chained context


def _check_header(header: dict[str, Any]) -> tuple[Alg, str]:
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise TokenRejected("alg")
    kid = header.get("kid")
    if not isinstance(kid, str) or not 1 <= len(kid.encode("utf-8")) <= MAX_KID_BYTES:
        raise TokenRejected("kid")
    if any(member in header for member in FORBIDDEN_HEADER_MEMBERS):
        raise TokenRejected("forbidden-header")
    if "typ" in header and header["typ"] not in TYPES:
        raise TokenRejected("typ")
    return cast(Alg, alg), kid


def _check_claims(payload: dict[str, Any], rules: TokenRules, now: int) -> Claims:
    issuer = payload.get("iss")
    if not isinstance(issuer, str) or issuer != rules.issuer:
        raise TokenRejected("iss")
    audience, audience_is_string = _audience(payload.get("aud"), rules.resource)
    subject = _subject(payload.get("sub"), rules.allowed_subjects)
    expires = _time(payload, "exp")
    if expires is None or expires <= now:
        raise TokenRejected("exp")
    not_before = _time(payload, "nbf")
    if not_before is not None and not (not_before <= now + CLOCK_LEAD_S and not_before < expires):
        raise TokenRejected("nbf")
    issued_at = _time(payload, "iat")
    if issued_at is not None and not (issued_at <= now + CLOCK_LEAD_S and issued_at < expires):
        raise TokenRejected("iat")
    if "token_use" in payload and payload["token_use"] != "access":
        raise TokenRejected("token_use")
    return Claims(
        issuer=issuer,
        subject=subject,
        audience=audience,
        audience_is_string=audience_is_string,
        expires=expires,
        not_before=not_before,
        issued_at=issued_at,
        scopes=_scopes(payload),
        jti=_raw_string(payload, "jti"),
        gid=_raw_string(payload, "gid"),
        client_id=_raw_string(payload, "client_id"),
    )


def _audience(aud: object, resource: str) -> tuple[tuple[str, ...], bool]:
    if isinstance(aud, str):
        if aud != resource:
            raise TokenRejected("aud")
        return (aud,), True
    if (
        not isinstance(aud, list)
        or not 1 <= len(aud) <= MAX_AUDIENCES
        or not all(isinstance(item, str) and item for item in aud)
        or resource not in aud
    ):
        raise TokenRejected("aud")
    return tuple(aud), False


def _subject(sub: object, allowed: frozenset[str]) -> str:
    if (
        not isinstance(sub, str)
        or not 1 <= len(sub.encode("utf-8")) <= MAX_SUBJECT_BYTES
        or sub != sub.strip()
        or any(unicodedata.category(char) == "Cc" for char in sub)
        or sub not in allowed
    ):
        raise TokenRejected("sub")
    return sub


def _scopes(payload: dict[str, Any]) -> tuple[str, ...]:
    if "scope" not in payload:
        return ()
    scope = payload["scope"]
    if not isinstance(scope, str) or len(scope) > MAX_SCOPE_CHARS or not _SCOPE.fullmatch(scope):
        raise TokenRejected("scope")
    return tuple(scope.split())


def _time(payload: dict[str, Any], name: str) -> int | None:
    """Return a NumericDate member that is a non-negative integer literal; None when absent."""
    if name not in payload:
        return None
    value = payload[name]
    # type() rather than isinstance(): JSON true is a bool, and a bool is an int in Python.
    if type(value) is not int or not 0 <= value <= MAX_TIME:
        raise TokenRejected(name)
    return value


def _raw_string(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name)
    return value if isinstance(value, str) else None
