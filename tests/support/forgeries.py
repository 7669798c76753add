"""One catalogue of forged and invalid access tokens, with the rule that must reject each.

Each entry builds its token from a Minter (which carries `now`), so the same catalogue drives
the pure unit tests and the HTTP tests. `parse_time` entries are refused by parse_token
itself and so must never cause a key fetch; the others pass parsing and are refused by the
key lookup (UNKNOWN_KID) or by verify_signature.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from support.tokens import (
    ABSENT,
    RESOURCE,
    SUBJECT,
    UNKNOWN_KID,
    Minter,
    b64url,
    compact,
    outsider_key,
    rsa_key,
    sized_token,
    with_member,
)

MAX_TOKEN_BYTES = 16384


@dataclass(frozen=True)
class Forgery:
    """A named bad token: how to build it, the rule that rejects it, and at which stage."""

    name: str
    build: Callable[[Minter], str]
    rule: str
    parse_time: bool = True  # refused before any key is needed


def header(**overrides: object) -> Callable[[Minter], str]:
    """Build a correctly signed RS256 token whose header carries the overrides."""
    return lambda m: m.raw(m.header(**overrides), m.claims())


def claims(**overrides: object) -> Callable[[Minter], str]:
    """Build a correctly signed RS256 token whose claims carry the overrides."""
    return lambda m: m.raw(m.header(), m.claims(**overrides))


def payload_member(member: Callable[[Minter], str]) -> Callable[[Minter], str]:
    """Build a token whose payload JSON ends with the raw member text given for `m`."""
    return lambda m: m.raw(m.header(), with_member(compact(m.claims()), member(m)))


def alg_none(m: Minter) -> str:
    return m.raw(m.header(alg="none"), m.claims()).rsplit(".", 1)[0] + "."


def hs256_with_public_pem(m: Minter) -> str:
    """The classic confusion: HMAC keyed with the RSA public key a naive verifier would use."""
    signing_input = f"{b64url(compact(m.header(alg='HS256')))}.{b64url(compact(m.claims()))}"
    mac = hmac.new(m.rsa.public_pem(), signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(mac)}"


def rs512(m: Minter) -> str:
    signing_input = f"{b64url(compact(m.header(alg='RS512')))}.{b64url(compact(m.claims()))}"
    signature = m.rsa.sign(signing_input.encode("ascii"), hashes.SHA512())
    return f"{signing_input}.{b64url(signature)}"


def es256_header_rsa_signature(m: Minter) -> str:
    """ES256 and the EC key's kid in the header, but an RSA signature (256 bytes)."""
    return m.raw(m.header(m.ec), m.claims(), m.rsa)


def rs256_header_ec_key(m: Minter) -> str:
    """RS256 in the header but the EC key's kid, signed by that EC key."""
    return m.raw(m.header(m.ec, alg="RS256"), m.claims(), m.ec)


def uppercase_alg(m: Minter) -> str:
    return m.raw({"ALG": "RS256", "kid": m.rsa.kid, "typ": "at+jwt"}, m.claims())


def duplicate_header_member(m: Minter) -> str:
    """First-wins reads HS256, last-wins reads RS256: the token says two things."""
    header_json = f'{{"alg":"HS256","kid":"{m.rsa.kid}","typ":"at+jwt","alg":"RS256"}}'
    return m.raw(header_json.encode("ascii"), m.claims())


def padded(part: int) -> Callable[[Minter], str]:
    """Build a token whose header (0), payload (1) or signature (2) part carries '=' padding."""

    def build(m: Minter) -> str:
        parts = m.token().split(".")
        if part < 2:  # re-sign, so only the padding is wrong
            parts[part] += "=" * max(1, -len(parts[part]) % 4)
            return m.signed(parts[0], parts[1])
        parts[2] += "=" * max(1, -len(parts[2]) % 4)
        return ".".join(parts)

    return build


def inserted(char: str) -> Callable[[Minter], str]:
    """Build a valid token with `char` inserted inside its payload part."""

    def build(m: Minter) -> str:
        token = m.token()
        middle = token.index(".") + 5
        return token[:middle] + char + token[middle:]

    return build


def flipped_signature(m: Minter) -> str:
    header_part, payload_part, _ = m.token().split(".")
    signature = bytearray(m.rsa.sign(f"{header_part}.{payload_part}".encode("ascii")))
    signature[len(signature) // 2] ^= 0x01
    return f"{header_part}.{payload_part}.{b64url(bytes(signature))}"


def es256_signature(transform: Callable[[bytes], bytes]) -> Callable[[Minter], str]:
    """Build an ES256 token whose valid 64-byte signature is replaced by transform(it)."""

    def build(m: Minter) -> str:
        header_part, payload_part, _ = m.token(m.ec).split(".")
        signature = m.ec.sign(f"{header_part}.{payload_part}".encode("ascii"))
        return f"{header_part}.{payload_part}.{b64url(transform(signature))}"

    return build


def _der(raw: bytes) -> bytes:
    """Re-encode a raw r||s signature as DER, the form JOSE forbids."""
    return encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))


def with_kid(kid: str) -> Callable[[Minter], str]:
    """Build a token signed by the published RSA key but naming another kid."""
    return lambda m: m.raw(m.header(kid=kid), m.claims())


def unpublished_key(m: Minter) -> str:
    key = outsider_key()
    return m.raw(m.header(key), m.claims(), key)


FORGERIES: tuple[Forgery, ...] = (
    # size and shape (steps 1-3)
    Forgery("16385-byte token", lambda m: sized_token(m, MAX_TOKEN_BYTES + 1), "length"),
    Forgery("empty token", lambda m: "", "length"),
    Forgery("space inside", inserted(" "), "whitespace"),
    Forgery("tab inside", inserted("\t"), "whitespace"),
    Forgery("CR inside", inserted("\r"), "whitespace"),
    Forgery("LF inside", inserted("\n"), "whitespace"),
    Forgery("trailing LF", lambda m: m.token() + "\n", "whitespace"),
    Forgery("static secret", lambda m: "static-secret", "parts"),
    Forgery("two parts", lambda m: m.token().rsplit(".", 1)[0], "parts"),
    Forgery("four parts", lambda m: m.token() + ".AAAA", "parts"),
    Forgery("dot suffix", lambda m: m.token() + ".suffix", "parts"),
    Forgery("a.b.c", lambda m: "a.b.c", "header-encoding"),
    Forgery("padded header", padded(0), "header-encoding"),
    Forgery("padded payload", padded(1), "payload-encoding"),
    Forgery("padded signature", padded(2), "signature-encoding"),
    Forgery("token plus =", lambda m: m.token() + "=", "signature-encoding"),
    Forgery("empty signature", lambda m: m.token().rsplit(".", 1)[0] + ".", "signature-encoding"),
    Forgery("header over 2048 bytes", header(x5c=["A" * 2100]), "header-size"),
    # header (steps 4-8)
    Forgery("duplicate header member", duplicate_header_member, "duplicate-member"),
    Forgery("alg none", alg_none, "alg"),
    Forgery("HS256 keyed with the RSA public PEM", hs256_with_public_pem, "alg"),
    Forgery("RS512", rs512, "alg"),
    Forgery("alg missing", header(alg=ABSENT), "alg"),
    Forgery("ALG instead of alg", uppercase_alg, "alg"),
    Forgery("alg lower case", header(alg="rs256"), "alg"),
    Forgery("alg as an array", header(alg=["RS256"]), "alg"),
    Forgery("kid missing", header(kid=ABSENT), "kid"),
    Forgery("kid empty", header(kid=""), "kid"),
    Forgery("kid of 257 bytes", header(kid="k" * 257), "kid"),
    Forgery("kid a number", header(kid=1), "kid"),
    Forgery("crit", header(crit=["exp"]), "forbidden-header"),
    Forgery("b64", header(b64=False), "forbidden-header"),
    Forgery("jku", header(jku="https://attacker.example/jwks.json"), "forbidden-header"),
    Forgery("x5u", header(x5u="https://attacker.example/cert.pem"), "forbidden-header"),
    Forgery("jwk", header(jwk={"kty": "oct", "k": "AAAA"}), "forbidden-header"),
    Forgery("zip", header(zip="DEF"), "forbidden-header"),
    Forgery("typ id_token", header(typ="id_token"), "typ"),
    Forgery("typ null", header(typ=None), "typ"),
    # payload JSON (steps 9 and 4)
    Forgery(
        "duplicate payload member",
        payload_member(lambda m: f'"sub":"{m.subject}"'),
        "duplicate-member",
    ),
    Forgery(
        "duplicate member nested in a payload object",
        payload_member(lambda m: '"ext":{"a":{"b":[{"c":1,"c":2}]}}'),
        "duplicate-member",
    ),
    Forgery("payload not an object", lambda m: m.raw(m.header(), b"[]"), "not-object"),
    Forgery(
        "payload nested 17 deep",
        payload_member(lambda m: '"ext":' + "[" * 16 + "]" * 16),
        "depth",
    ),
    Forgery(
        "payload trailing data",
        lambda m: m.raw(m.header(), compact(m.claims()) + b"{}"),
        "trailing-data",
    ),
    # iss, aud, sub (steps 10-12)
    Forgery("wrong iss", claims(iss="https://attacker.example/"), "iss"),
    Forgery("iss without its trailing slash", claims(iss="https://login.example.com"), "iss"),
    Forgery("iss missing", claims(iss=ABSENT), "iss"),
    Forgery(
        "ISS AUD SUB instead of iss aud sub",
        lambda m: m.raw(
            m.header(),
            m.claims(iss=ABSENT, aud=ABSENT, sub=ABSENT, ISS=m.issuer, AUD=m.resource, SUB=SUBJECT),
        ),
        "iss",
    ),
    Forgery("wrong aud", claims(aud="https://mail.example.com/other"), "aud"),
    Forgery("aud missing", claims(aud=ABSENT), "aud"),
    Forgery("aud array with a number", claims(aud=[RESOURCE, 1]), "aud"),
    Forgery("aud array with null", claims(aud=[RESOURCE, None]), "aud"),
    Forgery("aud array with an empty string", claims(aud=[RESOURCE, ""]), "aud"),
    Forgery("aud empty array", claims(aud=[]), "aud"),
    Forgery(
        "aud array of 33",
        claims(aud=[RESOURCE] + [f"https://x{n}.example/" for n in range(32)]),
        "aud",
    ),
    Forgery("aud array without the resource", claims(aud=["https://other.example/mcp"]), "aud"),
    Forgery("sub missing", claims(sub=ABSENT), "sub"),
    Forgery("sub not allowed", claims(sub="someone-else"), "sub"),
    Forgery("sub with surrounding whitespace", claims(sub=f" {SUBJECT} "), "sub"),
    Forgery("sub with a control character", claims(sub=f"{SUBJECT}\x00"), "sub"),
    Forgery("sub a number", claims(sub=123), "sub"),
    # times (steps 13-14)
    Forgery(
        "expired", lambda m: m.raw(m.header(), m.claims(exp=m.now - 1, nbf=m.now - 120)), "exp"
    ),
    Forgery("exp equal to now", lambda m: m.raw(m.header(), m.claims(exp=m.now)), "exp"),
    Forgery("exp missing", claims(exp=ABSENT), "exp"),
    Forgery("exp a string", lambda m: m.raw(m.header(), m.claims(exp=str(m.now + 3600))), "exp"),
    Forgery("exp fractional", lambda m: m.raw(m.header(), m.claims(exp=m.now + 3600.5)), "exp"),
    Forgery("exp null", claims(exp=None), "exp"),
    Forgery("exp true", claims(exp=True), "exp"),
    Forgery(
        "exp in exponent form",
        lambda m: m.raw(
            m.header(), with_member(compact(m.claims(exp=ABSENT)), f'"exp":{m.now + 3600}e0')
        ),
        "exp",
    ),
    Forgery("exp beyond 64 bits", claims(exp=2**63), "exp"),
    Forgery(
        "nbf beyond the clock lead", lambda m: m.raw(m.header(), m.claims(nbf=m.now + 400)), "nbf"
    ),
    Forgery("nbf null", claims(nbf=None), "nbf"),
    Forgery(
        "iat beyond the clock lead", lambda m: m.raw(m.header(), m.claims(iat=m.now + 400)), "iat"
    ),
    Forgery("iat negative", claims(iat=-1), "iat"),
    Forgery("iat fractional", lambda m: m.raw(m.header(), m.claims(iat=m.now - 0.5)), "iat"),
    # token_use and scope (steps 15-16)
    Forgery("token_use id", claims(token_use="id"), "token_use"),
    Forgery("scope as an array", claims(scope=["mail.read"]), "scope"),
    Forgery("scope with a tab", claims(scope="mail.read\tmail.send"), "scope"),
    Forgery("scope with a quote", claims(scope='mail.read "x"'), "scope"),
    Forgery("scope over 4096 characters", claims(scope="mail.read " + "x" * 4096), "scope"),
    # key lookup (step 18): well-formed, refused because no published key matches
    Forgery("kid not published", unpublished_key, UNKNOWN_KID, parse_time=False),
    Forgery("kid path traversal", with_kid("../../etc/passwd"), UNKNOWN_KID, parse_time=False),
    Forgery("kid SQL-like", with_kid("' OR 1=1 --"), UNKNOWN_KID, parse_time=False),
    # signature (step 19)
    Forgery(
        "ES256 header, RSA signature",
        es256_header_rsa_signature,
        "signature-length",
        parse_time=False,
    ),
    Forgery("RS256 header naming the EC key", rs256_header_ec_key, "key-alg", parse_time=False),
    Forgery("bit-flipped signature", flipped_signature, "signature", parse_time=False),
    Forgery(
        "ES256 signature of 63 bytes",
        es256_signature(lambda sig: sig[:63]),
        "signature-length",
        parse_time=False,
    ),
    Forgery(
        "ES256 signature of 65 bytes",
        es256_signature(lambda sig: sig + b"\x00"),
        "signature-length",
        parse_time=False,
    ),
    Forgery(
        "ES256 signature all zero",
        es256_signature(lambda sig: bytes(64)),
        "signature",
        parse_time=False,
    ),
    Forgery("ES256 signature in DER", es256_signature(_der), "signature-length", parse_time=False),
    Forgery(
        "signed by another RSA key under the published kid",
        lambda m: m.raw(m.header(), m.claims(), rsa_key("key-impostor")),
        "signature",
        parse_time=False,
    ),
)

BY_NAME: dict[str, Forgery] = {forgery.name: forgery for forgery in FORGERIES}
assert len(BY_NAME) == len(FORGERIES), "forgery names must be unique"
