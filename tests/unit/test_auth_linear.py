"""The token, key-set and strict-JSON parsers are linear up to their size limits.

Each case times a parser at a quarter of its limit and at the limit, on shapes that make a
parser do the most work per byte (many members, many strings, nesting at the depth limit),
and requires growth well under the ~16x of quadratic work (support/linear.py).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from schemas.strict_json import StrictJsonError, parse_object
from service.auth.resource.jwks import MAX_JWKS_BYTES, JwksError, parse_jwks
from service.auth.resource.jwt import MAX_TOKEN_BYTES, TokenRejected, parse_token
from support.linear import LINEAR_BOUND, growth
from support.tokens import Minter, b64url, compact, rsa_key

NOW = 1_800_000_000
MINTER = Minter(now=NOW)
HEADER_PART = b64url(compact(MINTER.header()))
SIGNATURE_PART = b64url(bytes(256))  # parsing never checks it; verification is separate


def assert_linear(
    parse: Callable[[bytes], object], build: Callable[[int], bytes], limit: int
) -> None:
    ratio = growth(parse, build, limit)
    assert ratio < LINEAR_BOUND, f"CPU grew {ratio:.1f}x from limit/4 to the limit"


def filled(unit: bytes, size: int, *, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    """`open_` unit,unit,... `close`: about `size` bytes of repeated array items or members."""
    count = max(1, (size - len(open_) - len(close)) // (len(unit) + 1))
    return open_ + b",".join([unit] * count) + close


def members(size: int) -> bytes:
    """An object of distinct members "m0":0, "m1":0, ... of about `size` bytes."""
    items: list[bytes] = []
    used = 2
    while used + 12 <= size:
        items.append(b'"m%d":0' % len(items))
        used += len(items[-1]) + 1
    return b"{" + b",".join(items) + b"}"


# Bodies of one member "f" that a payload or document carries; `size` is the member's budget.
SHAPES: dict[str, Callable[[int], bytes]] = {
    "many members": members,
    "many strings": lambda size: filled(b'"abc"', size),
    "escaped strings": lambda size: filled(b'"\\u00e9\\n"', size),
    "surrogate pairs": lambda size: filled(b'"\\ud83d\\ude00"', size),
    "non-integers": lambda size: filled(b"1.5e3", size),
    "small objects": lambda size: filled(b'{"a":[]}', size),
    "strings at the depth limit": lambda size: b"[" * 14 + filled(b'"a"', size - 28) + b"]" * 14,
    "deep siblings": lambda size: filled(b"[" * 14 + b"]" * 14, size),
}


def member(shape: str, size: int) -> bytes:
    return SHAPES[shape](size)


def token_of(shape: str) -> Callable[[int], str]:
    """A well-formed token of about `size` bytes whose payload carries the shape."""

    def build(size: int) -> str:
        claims = compact(MINTER.claims())
        budget = (size - len(HEADER_PART) - len(SIGNATURE_PART) - 2) * 3 // 4 - len(claims) - 6
        payload = claims[:-1] + b',"f":' + member(shape, budget) + b"}"
        return f"{HEADER_PART}.{b64url(payload)}.{SIGNATURE_PART}"

    return build


def parse(token: str) -> object:
    return parse_token(token, MINTER.rules, NOW)


@pytest.mark.parametrize("shape", SHAPES)
def test_parsing_a_token_is_linear(shape: str) -> None:
    token = token_of(shape)(MAX_TOKEN_BYTES)
    assert len(token) <= MAX_TOKEN_BYTES
    assert MINTER.subject == parse_token(token, MINTER.rules, NOW).claims.subject
    assert_linear(parse, token_of(shape), MAX_TOKEN_BYTES)


def test_refusing_a_token_with_a_late_duplicate_is_linear() -> None:
    def build(size: int) -> str:
        token = token_of("many members")(size - 16)
        header, payload, signature = token.split(".")
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        duplicated = raw[:-1] + b',"sub":1}'
        return f"{header}.{b64url(duplicated)}.{signature}"

    def refuse(token: str) -> str:
        try:
            parse(token)
        except TokenRejected as rejected:
            return rejected.rule
        raise AssertionError("accepted")

    assert "duplicate-member" == refuse(build(MAX_TOKEN_BYTES))
    assert_linear(refuse, build, MAX_TOKEN_BYTES)


def jwks_of(shape: str) -> Callable[[int], bytes]:
    """A valid key set of about `size` bytes: 32 RSA keys and a member of the shape."""
    keys = [{**rsa_key().public_jwk(), "kid": f"k{n}"} for n in range(32)]
    head = json.dumps({"keys": keys}).encode()[:-1]

    def build(size: int) -> bytes:
        return head + b',"f":' + member(shape, size - len(head) - 8) + b"}"

    return build


@pytest.mark.parametrize("shape", SHAPES)
def test_parsing_a_key_set_is_linear(shape: str) -> None:
    document = jwks_of(shape)(MAX_JWKS_BYTES)
    assert len(document) <= MAX_JWKS_BYTES
    assert 32 == len(parse_jwks(document))
    assert_linear(parse_jwks, jwks_of(shape), MAX_JWKS_BYTES)


def test_refusing_a_key_set_with_a_late_private_member_is_linear() -> None:
    def build(size: int) -> bytes:
        body = jwks_of("many strings")(size - 64)
        return body.replace(b'"kid": "k31"', b'"kid": "k31", "d": "AQAB"')

    def refuse(document: bytes) -> str:
        try:
            parse_jwks(document)
        except JwksError as error:
            return error.rule
        raise AssertionError("accepted")

    assert "private-member" == refuse(build(MAX_JWKS_BYTES))
    assert_linear(refuse, build, MAX_JWKS_BYTES)


def object_of(shape: str) -> Callable[[int], bytes]:
    return lambda size: b'{"f":' + member(shape, size - 6) + b"}"


@pytest.mark.parametrize("limit", [MAX_TOKEN_BYTES, MAX_JWKS_BYTES], ids=["token", "key set"])
@pytest.mark.parametrize("shape", SHAPES)
def test_parsing_strict_json_is_linear(shape: str, limit: int) -> None:
    assert "f" in parse_object(object_of(shape)(limit))
    assert_linear(parse_object, object_of(shape), limit)


def test_refusing_over_deep_json_is_linear() -> None:
    def refuse(data: bytes) -> str:
        try:
            parse_object(data)
        except StrictJsonError as error:
            return error.rule
        raise AssertionError("accepted")

    assert "depth" == refuse(b'{"f":' + b"[" * MAX_JWKS_BYTES)
    assert_linear(refuse, lambda size: b'{"f":' + b"[" * size + b"]" * size + b"}", MAX_JWKS_BYTES)
