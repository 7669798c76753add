"""The JWKS document rules: what invalidates a whole set, what is skipped, what is usable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc.jwk import OKPKey

from service.auth.resource.jwks import MAX_JWKS_BYTES, JwksError, parse_jwks
from support.tokens import b64url, ec_key, rsa_key


def rsa_jwk(kid: str = "rsa-a", **overrides: Any) -> dict[str, Any]:
    return {**rsa_key().public_jwk(), "kid": kid, **overrides}


def ec_jwk(kid: str = "ec-a", **overrides: Any) -> dict[str, Any]:
    return {**ec_key().public_jwk(), "kid": kid, **overrides}


def okp_jwk(kid: str = "okp-a") -> dict[str, Any]:
    return {**OKPKey.generate_key("Ed25519").as_dict(private=False), "kid": kid}


def document(*keys: dict[str, Any]) -> bytes:
    return json.dumps({"keys": list(keys)}).encode("utf-8")


def refusal(data: bytes) -> str:
    with pytest.raises(JwksError) as raised:
        parse_jwks(data)
    assert (None, None) == (raised.value.__cause__, raised.value.__context__)
    return raised.value.rule


def integer(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def test_rsa_and_ec_keys_are_usable_under_their_algorithms() -> None:
    keys = parse_jwks(document(rsa_jwk(), ec_jwk()))
    assert {"rsa-a": "RS256", "ec-a": "ES256"} == {kid: key.alg for kid, key in keys.items()}
    assert isinstance(keys["rsa-a"].key, rsa.RSAPublicKey)
    assert isinstance(keys["ec-a"].key, ec.EllipticCurvePublicKey)


def test_the_key_is_the_published_one() -> None:
    key = parse_jwks(document(rsa_jwk())).get("rsa-a")
    assert key is not None
    assert rsa_key().jwk.public_key.public_numbers() == key.key.public_numbers()


def test_alg_use_and_key_ops_may_be_absent() -> None:
    bare = {name: value for name, value in rsa_jwk().items() if name not in ("alg", "use")}
    assert ["rsa-a"] == list(parse_jwks(document(bare)))


@pytest.mark.parametrize("member", ["d", "p", "q", "dp", "dq", "qi", "oth", "k"])
def test_a_private_member_invalidates_the_set(member: str) -> None:
    assert "private-member" == refusal(document(rsa_jwk(), ec_jwk(**{member: "AQAB"})))


def test_a_private_member_in_a_skipped_key_still_invalidates_the_set() -> None:
    assert "private-member" == refusal(document(rsa_jwk(), {"kty": "oct", "kid": "s", "k": "AA"}))


def test_a_duplicate_kid_invalidates_the_set() -> None:
    assert "duplicate-kid" == refusal(document(rsa_jwk("x"), ec_jwk("x")))


def test_a_duplicate_kid_counts_unsupported_keys_too() -> None:
    assert "duplicate-kid" == refusal(document(rsa_jwk("x"), okp_jwk("x")))


def test_32_keys_are_allowed() -> None:
    keys = [rsa_jwk(f"k{n}") for n in range(32)]
    assert 32 == len(parse_jwks(document(*keys)))


def test_33_keys_invalidate_the_set() -> None:
    assert "keys" == refusal(document(*[rsa_jwk(f"k{n}") for n in range(33)]))


@pytest.mark.parametrize(
    "data",
    [b'{"keys":[]}', b'{"keys":null}', b'{"KEYS":[]}', b"{}", b'{"keys":{}}', b'{"keys":"k"}'],
)
def test_a_missing_empty_or_non_array_keys_member_invalidates_the_set(data: bytes) -> None:
    assert "keys" == refusal(data)


def test_keys_spelled_in_capitals_is_not_keys() -> None:
    assert "keys" == refusal(json.dumps({"KEYS": [rsa_jwk()]}).encode())


def test_a_document_of_exactly_256_kib_parses() -> None:
    data = document(rsa_jwk())
    data = data[:-1] + b" " * (MAX_JWKS_BYTES - len(data)) + b"}"
    assert (MAX_JWKS_BYTES, ["rsa-a"]) == (len(data), list(parse_jwks(data)))


def test_a_document_over_256_kib_is_refused() -> None:
    data = document(rsa_jwk())
    data = data[:-1] + b" " * (MAX_JWKS_BYTES + 1 - len(data)) + b"}"
    assert "size" == refusal(data)


def test_an_okp_key_beside_an_rsa_key_leaves_the_rsa_key_usable() -> None:
    assert ["rsa-a"] == list(parse_jwks(document(okp_jwk(), rsa_jwk())))


def test_only_unsupported_keys_invalidate_the_set() -> None:
    assert "no-usable-key" == refusal(document(okp_jwk(), ec_jwk(use="enc")))


@pytest.mark.parametrize(
    "overrides",
    [
        {"use": "enc"},
        {"key_ops": ["sign"]},
        {"key_ops": ["verify", "sign"]},
        {"key_ops": "verify"},
        {"key_ops": []},
        {"alg": "RS512"},
        {"alg": "PS256"},
        {"kty": "oct"},
        {"kty": None},
    ],
    ids=str,
)
def test_an_rsa_key_not_for_rs256_verification_is_skipped(overrides: dict[str, Any]) -> None:
    assert ["ec-a"] == list(parse_jwks(document(rsa_jwk(**overrides), ec_jwk())))


def test_key_ops_verify_alone_is_usable() -> None:
    assert ["rsa-a"] == list(parse_jwks(document(rsa_jwk(key_ops=["verify"]))))


@pytest.mark.parametrize(
    "overrides",
    [{"crv": "P-384"}, {"crv": "secp256k1"}, {"crv": None}, {"alg": "ES384"}, {"alg": "RS256"}],
    ids=str,
)
def test_an_ec_key_not_for_es256_verification_is_skipped(overrides: dict[str, Any]) -> None:
    assert ["rsa-a"] == list(parse_jwks(document(rsa_jwk(), ec_jwk(**overrides))))


def test_a_p384_key_is_skipped() -> None:
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key().public_numbers()
    jwk = {"kty": "EC", "kid": "p384", "crv": "P-384", "x": integer(p384.x), "y": integer(p384.y)}
    assert ["rsa-a"] == list(parse_jwks(document(jwk, rsa_jwk())))


@pytest.mark.parametrize(("member", "value"), [("use", 1), ("use", None), ("alg", 256)])
def test_a_non_string_use_or_alg_invalidates_the_set(member: str, value: object) -> None:
    assert member == refusal(document(rsa_jwk(), ec_jwk(**{member: value})))


@pytest.mark.parametrize("kid", [None, "", "k" * 257, 7])
def test_a_bad_kid_invalidates_the_set(kid: object) -> None:
    assert "kid" == refusal(document(rsa_jwk(), rsa_jwk(kid=kid)))


def test_a_kid_of_256_bytes_is_fine() -> None:
    assert ["k" * 256] == list(parse_jwks(document(rsa_jwk("k" * 256))))


def test_a_non_object_entry_invalidates_the_set() -> None:
    assert "entry" == refusal(json.dumps({"keys": [rsa_jwk(), "key"]}).encode())


def test_a_1024_bit_rsa_key_invalidates_the_set() -> None:
    small = rsa.generate_private_key(65537, 1024).public_key().public_numbers()
    assert "rsa-n" == refusal(document(ec_jwk(), rsa_jwk(n=integer(small.n))))


def test_a_2047_bit_modulus_invalidates_the_set() -> None:
    assert "rsa-n" == refusal(document(rsa_jwk(n=integer(2**2046 + 1))))


def test_an_even_modulus_invalidates_the_set() -> None:
    n = rsa_key().jwk.public_key.public_numbers().n
    assert "rsa-n" == refusal(document(rsa_jwk(n=integer(n + 1))))


def test_a_modulus_with_a_leading_zero_byte_invalidates_the_set() -> None:
    n = rsa_key().jwk.public_key.public_numbers().n
    assert "rsa-n" == refusal(document(rsa_jwk(n=b64url(b"\x00" + n.to_bytes(256, "big")))))


def test_a_padded_modulus_invalidates_the_set() -> None:
    assert "rsa-n" == refusal(document(rsa_jwk(n=rsa_jwk()["n"] + "==")))


@pytest.mark.parametrize(
    "e",
    [integer(65536), integer(1), integer(2**31 + 1), b64url(b"\x01\x00\x00\x00\x01"), "AAEAAQ", ""],
    ids=["even", "one", "over 2^31-1", "five bytes", "leading zero", "empty"],
)
def test_a_bad_exponent_invalidates_the_set(e: str) -> None:
    assert "rsa-e" == refusal(document(rsa_jwk(e=e)))


@pytest.mark.parametrize("e", [3, 65537, 2**31 - 1])
def test_odd_exponents_from_3_to_2_31_minus_1_are_fine(e: int) -> None:
    assert ["rsa-a"] == list(parse_jwks(document(rsa_jwk(e=integer(e)))))


def test_a_missing_modulus_invalidates_the_set() -> None:
    jwk = rsa_jwk()
    del jwk["n"]
    assert "rsa-n" == refusal(document(jwk))


def test_an_ec_point_off_the_curve_invalidates_the_set() -> None:
    y = ec_key().jwk.public_key.public_numbers().y
    assert "ec-point" == refusal(document(rsa_jwk(), ec_jwk(y=b64url((y ^ 1).to_bytes(32, "big")))))


@pytest.mark.parametrize("size", [31, 33])
def test_an_ec_coordinate_not_of_32_bytes_invalidates_the_set(size: int) -> None:
    assert "ec-point" == refusal(document(ec_jwk(x=b64url(b"\x01" * size))))


def test_duplicate_members_in_the_document_invalidate_the_set() -> None:
    data = document(rsa_jwk())
    assert "duplicate-member" == refusal(data[:-1] + b', "keys": []}')


def test_the_error_names_the_rule_only() -> None:
    with pytest.raises(JwksError) as raised:
        parse_jwks(document(rsa_jwk(d="c2VjcmV0")))
    assert "private-member" == str(raised.value)
