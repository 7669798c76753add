"""The first-party signing key: what loads, what is refused, and the tokens and key set it makes."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from service.auth.resource.jwks import parse_jwks
from service.auth.resource.jwt import TokenRejected, TokenRules, parse_token, verify_signature
from service.auth.server.signing import Signer, new_signing_key
from service.config.signing_keys import (
    KeyRefused,
    VerificationKey,
    load_signing_key,
    load_verification_key,
)
from support.oauth_keys import (
    encrypted_pkcs8,
    encrypted_sec1,
    p256,
    p384_pkcs8,
    pkcs8,
    public_pem,
    rsa_pkcs8,
    scalar_hex,
    sec1,
    secret_fragments,
)

ISSUER = "https://mail.example.com"
RESOURCE = ISSUER + "/mcp"
NOW = 1_800_000_000


def claims() -> dict[str, object]:
    return {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "owner",
        "iat": NOW,
        "exp": NOW + 300,
        "jti": "j" * 43,
        "scope": "mail.read mail.send",
        "gid": "g" * 43,
        "client_id": "angelos-claude",
        "token_use": "access",
    }


def b64url_json(part: str) -> object:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def refusal(load: Callable[[str], object], pem: str) -> str:
    with pytest.raises(KeyRefused) as raised:
        load(pem)
    assert (None, None) == (raised.value.__cause__, raised.value.__context__)
    return str(raised.value)


def mismatched_sec1() -> str:
    """A SEC1 key whose embedded public point belongs to another key."""
    key = p256()
    fmt = serialization.PublicFormat.UncompressedPoint
    own = key.public_key().public_bytes(serialization.Encoding.X962, fmt)
    other = p256().public_key().public_bytes(serialization.Encoding.X962, fmt)
    der = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).replace(own, other)
    body = base64.encodebytes(der).decode()
    return f"-----BEGIN EC PRIVATE KEY-----\n{body}-----END EC PRIVATE KEY-----\n"


def test_a_pkcs8_p256_key_loads_as_itself() -> None:
    key = p256()
    assert scalar_hex(key) == scalar_hex(load_signing_key(pkcs8(key)))


def test_a_sec1_p256_key_loads_as_itself() -> None:
    key = p256()
    assert scalar_hex(key) == scalar_hex(load_signing_key(sec1(key)))


def test_whitespace_around_the_block_and_crlf_lines_are_accepted() -> None:
    key = p256()
    pem = "\n  " + pkcs8(key).replace("\n", "\r\n") + "\n\n"
    assert scalar_hex(key) == scalar_hex(load_signing_key(pem))


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda: encrypted_pkcs8(p256()), "is encrypted"),
        (lambda: encrypted_sec1(p256()), "is encrypted"),
        (p384_pkcs8, "must be on the P-256 curve"),
        (rsa_pkcs8, "must be an EC key on P-256"),
        (lambda: public_pem(p256()), "must be a PRIVATE KEY or EC PRIVATE KEY block"),
        (lambda: pkcs8(p256()) + pkcs8(p256()), "must hold exactly one PEM block"),
        (lambda: "", "is empty"),
        (lambda: " \n", "is empty"),
        (lambda: "key: " + pkcs8(p256()), "must be one PEM block"),
        (lambda: pkcs8(p256()).replace("\n", "\\n"), "must be one PEM block"),
        (lambda: pkcs8(p256()).replace("MI", "M!", 1), "must be one PEM block"),
        (lambda: pkcs8(p256()).replace("-----\n", "-----\nComment: x\n\n", 1), "must be one PEM"),
        (lambda: pkcs8(p256()).replace("END PRIVATE", "END EC PRIVATE"), "must be one PEM"),
        (mismatched_sec1, "is not a valid EC PRIVATE KEY"),
        (lambda: sec1(p256()).replace("EC PRIVATE", "PRIVATE"), "is not a valid PRIVATE KEY"),
        (lambda: pkcs8(p256()) + " " * 16384, "must be at most 16384 bytes"),
    ],
)
def test_a_signing_key_outside_the_rules_is_refused(make: Callable[[], str], rule: str) -> None:
    assert refusal(load_signing_key, make()).startswith(rule)


def test_a_refusal_never_carries_key_material() -> None:
    pem = mismatched_sec1()
    message = refusal(load_signing_key, pem)
    assert [] == [fragment for fragment in secret_fragments(pem) if fragment[:16] in message]


def test_a_public_p256_key_loads_for_verification() -> None:
    key = p256()
    loaded = load_verification_key(public_pem(key))
    assert key.public_key().public_numbers() == loaded.public_numbers()


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda: pkcs8(p256()), "must be a PUBLIC KEY block"),
        (lambda: sec1(p256()), "must be a PUBLIC KEY block"),
        (lambda: public_pem(ec.generate_private_key(ec.SECP384R1())), "must be on the P-256"),
        (lambda: public_pem(p256()).replace("MF", "MG", 1), "is not a valid PUBLIC KEY"),
    ],
)
def test_a_verification_key_outside_the_rules_is_refused(
    make: Callable[[], str], rule: str
) -> None:
    assert refusal(load_verification_key, make()).startswith(rule)


def test_the_token_header_is_exactly_es256_kid_and_at_jwt() -> None:
    token = Signer(p256(), "k-2025").sign_access_token(claims())
    header = token.split(".")[0]
    assert b'{"alg":"ES256","kid":"k-2025","typ":"at+jwt"}' == base64.urlsafe_b64decode(
        header + "=" * (-len(header) % 4)
    )


def test_the_signature_is_64_raw_bytes_and_the_payload_is_the_claims() -> None:
    _, payload, signature = Signer(p256(), "k1").sign_access_token(claims()).split(".")
    assert 64 == len(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    assert claims() == b64url_json(payload)


def test_the_resource_servers_strict_path_accepts_a_signed_token_with_the_key_set() -> None:
    signer = Signer(p256(), "active", [VerificationKey("old", p256().public_key())])
    keys = parse_jwks(signer.jwks_document())
    rules = TokenRules(issuer=ISSUER, resource=RESOURCE, allowed_subjects=frozenset({"owner"}))
    token = parse_token(signer.sign_access_token(claims()), rules, NOW)
    verify_signature(token, keys[token.kid])
    assert ("active", "ES256", ("mail.read", "mail.send")) == (
        token.kid,
        token.alg,
        token.claims.scopes,
    )


def test_pyjwt_verifies_a_signed_token_with_the_published_key() -> None:
    signer = Signer(p256(), "active")
    key_set = pyjwt.PyJWKSet.from_json(signer.jwks_document().decode())
    decoded = pyjwt.decode(
        signer.sign_access_token(claims()),
        key_set["active"].key,
        algorithms=["ES256"],
        audience=RESOURCE,
        issuer=ISSUER,
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims() == decoded


def test_a_token_signed_by_another_key_fails_the_strict_path() -> None:
    published = Signer(p256(), "active")
    impostor = Signer(p256(), "active")
    keys = parse_jwks(published.jwks_document())
    rules = TokenRules(issuer=ISSUER, resource=RESOURCE, allowed_subjects=frozenset({"owner"}))
    token = parse_token(impostor.sign_access_token(claims()), rules, NOW)
    with pytest.raises(TokenRejected) as raised:
        verify_signature(token, keys["active"])
    assert "signature" == raised.value.rule


def test_the_key_set_lists_the_active_key_then_the_retiring_ones_by_kid() -> None:
    active = p256()
    retiring = [VerificationKey(kid, p256().public_key()) for kid in ("zeta", "alpha", "mid")]
    document = json.loads(Signer(active, "now", retiring).jwks_document())
    assert ["now", "alpha", "mid", "zeta"] == [entry["kid"] for entry in document["keys"]]


def test_each_published_key_has_exactly_the_public_members_with_32_byte_coordinates() -> None:
    key = p256()
    entry = json.loads(Signer(key, "k1").jwks_document())["keys"][0]
    numbers = key.public_key().public_numbers()
    assert {
        "kty": "EC",
        "use": "sig",
        "alg": "ES256",
        "kid": "k1",
        "crv": "P-256",
        "x": base64.urlsafe_b64encode(numbers.x.to_bytes(32, "big")).rstrip(b"=").decode(),
        "y": base64.urlsafe_b64encode(numbers.y.to_bytes(32, "big")).rstrip(b"=").decode(),
    } == entry
    assert ["kty", "use", "alg", "kid", "crv", "x", "y"] == list(entry)


def test_the_signers_repr_names_kids_only() -> None:
    key = p256()
    signer = Signer(key, "k1", [VerificationKey("k0", p256().public_key())])
    assert "Signer(kid='k1', retiring=['k0'])" == repr(signer)
    assert scalar_hex(key) not in repr(signer)


def test_a_new_signing_key_is_an_unencrypted_pkcs8_p256_key_with_a_usable_kid() -> None:
    pem, kid = new_signing_key()
    assert pem.startswith("-----BEGIN PRIVATE KEY-----\n")
    key = load_signing_key(pem)
    assert isinstance(key.curve, ec.SECP256R1)
    assert 1 <= len(kid) <= 128 and kid.isascii() and kid == kid.strip()


def test_two_new_signing_keys_differ() -> None:
    assert new_signing_key() != new_signing_key()
