"""What parse_token and verify_signature accept, and what an accepted token's claims hold."""

from __future__ import annotations

import pytest

from service.auth.resource.jwks import parse_jwks
from service.auth.resource.jwt import (
    CLOCK_LEAD_S,
    MAX_TOKEN_BYTES,
    Claims,
    TokenRejected,
    parse_token,
    verify_signature,
)
from support.tokens import (
    ABSENT,
    ACCEPTED,
    ISSUER,
    RESOURCE,
    SCOPE,
    SUBJECT,
    Minter,
    outcome,
    sized_token,
)

NOW = 1_800_000_000


@pytest.fixture
def minter() -> Minter:
    return Minter(now=NOW)


def test_a_valid_rs256_token_yields_its_claims(minter: Minter) -> None:
    token = parse_token(minter.token(minter.rsa), minter.rules, NOW)
    expected = Claims(
        issuer=ISSUER,
        subject=SUBJECT,
        audience=(RESOURCE,),
        audience_is_string=True,
        expires=NOW + 3600,
        not_before=NOW,
        issued_at=NOW - 60,
        scopes=tuple(SCOPE.split()),
        jti=None,
        gid=None,
        client_id=None,
    )
    assert ("key-1", "RS256", expected) == (token.kid, token.alg, token.claims)


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_valid_token_verifies_with_its_published_key(alg: str, minter: Minter) -> None:
    key = minter.rsa if alg == "RS256" else minter.ec
    token = parse_token(minter.token(key), minter.rules, NOW)
    verify_signature(token, parse_jwks(minter.jwks())[key.kid])
    assert alg == token.alg


def test_an_es256_signature_is_the_raw_64_bytes(minter: Minter) -> None:
    assert 64 == len(parse_token(minter.token(minter.ec), minter.rules, NOW).signature)


def test_an_audience_array_holding_the_resource_among_others_is_accepted(minter: Minter) -> None:
    audience = ["https://other.example/api", RESOURCE, "urn:example:x"]
    token = parse_token(minter.token(claims={"aud": audience}), minter.rules, NOW)
    assert (tuple(audience), False) == (token.claims.audience, token.claims.audience_is_string)


def test_an_audience_array_of_32_is_accepted(minter: Minter) -> None:
    audience = [f"https://x{n}.example/" for n in range(31)] + [RESOURCE]
    token = parse_token(minter.token(claims={"aud": audience}), minter.rules, NOW)
    assert 32 == len(token.claims.audience)


def test_upper_case_iss_aud_sub_are_other_members(minter: Minter) -> None:
    """ISS/AUD/SUB never alias the lower-case claims, which still decide."""
    extra = {"ISS": "https://attacker.example/", "AUD": "x", "SUB": "intruder"}
    token = parse_token(minter.token(claims=extra), minter.rules, NOW)
    assert (ISSUER, SUBJECT) == (token.claims.issuer, token.claims.subject)


def test_token_use_access_is_accepted(minter: Minter) -> None:
    assert ACCEPTED == outcome(minter.token(claims={"token_use": "access"}), minter)


@pytest.mark.parametrize("typ", ["JWT", "at+jwt", "application/at+jwt", ABSENT])
def test_the_access_token_types_and_no_type_are_accepted(typ: object, minter: Minter) -> None:
    assert ACCEPTED == outcome(minter.token(header={"typ": typ}), minter)


def test_nbf_and_iat_are_optional(minter: Minter) -> None:
    token = parse_token(minter.token(claims={"nbf": ABSENT, "iat": ABSENT}), minter.rules, NOW)
    assert (None, None) == (token.claims.not_before, token.claims.issued_at)


@pytest.mark.parametrize("lead", [1, CLOCK_LEAD_S])
def test_iat_and_nbf_up_to_the_issuers_clock_lead_are_accepted(lead: int, minter: Minter) -> None:
    token = minter.token(claims={"iat": NOW + lead, "nbf": NOW + lead})
    claims = parse_token(token, minter.rules, NOW).claims
    assert (NOW + lead, NOW + lead) == (claims.issued_at, claims.not_before)


@pytest.mark.parametrize("claim", ["iat", "nbf"])
def test_iat_or_nbf_beyond_the_clock_lead_is_refused(claim: str, minter: Minter) -> None:
    token = minter.token(claims={claim: NOW + CLOCK_LEAD_S + 1})
    with pytest.raises(TokenRejected) as raised:
        parse_token(token, minter.rules, NOW)
    assert claim == raised.value.rule


@pytest.mark.parametrize("claim", ["iat", "nbf"])
def test_iat_or_nbf_within_the_lead_but_at_or_after_exp_is_refused(
    claim: str, minter: Minter
) -> None:
    token = minter.token(claims={claim: NOW + 10, "exp": NOW + 10})
    with pytest.raises(TokenRejected) as raised:
        parse_token(token, minter.rules, NOW)
    assert claim == raised.value.rule


def test_exp_gets_no_clock_tolerance(minter: Minter) -> None:
    token = minter.token(claims={"iat": NOW - 120, "nbf": NOW - 120, "exp": NOW})
    with pytest.raises(TokenRejected) as raised:
        parse_token(token, minter.rules, NOW)
    assert "exp" == raised.value.rule


def test_exp_one_second_ahead_is_accepted(minter: Minter) -> None:
    assert ACCEPTED == outcome(minter.token(claims={"exp": NOW + 1}), minter)


@pytest.mark.parametrize(("scope", "scopes"), [(ABSENT, ()), ("", ()), ("  a  b ", ("a", "b"))])
def test_scopes_are_the_space_split_of_scope(
    scope: object, scopes: tuple[str, ...], minter: Minter
) -> None:
    token = parse_token(minter.token(claims={"scope": scope}), minter.rules, NOW)
    assert scopes == token.claims.scopes


def test_jti_gid_and_client_id_are_kept_raw(minter: Minter) -> None:
    raw = {"jti": "j-1", "gid": "g-1", "client_id": "c-1"}
    claims = parse_token(minter.token(claims=raw), minter.rules, NOW).claims
    assert ("j-1", "g-1", "c-1") == (claims.jti, claims.gid, claims.client_id)


def test_a_token_of_exactly_the_size_limit_is_accepted(minter: Minter) -> None:
    token = sized_token(minter, MAX_TOKEN_BYTES)
    assert (MAX_TOKEN_BYTES, ACCEPTED) == (len(token), outcome(token, minter))


def test_a_header_of_2048_bytes_is_accepted(minter: Minter) -> None:
    size = len(minter.raw(minter.header(x5t=""), minter.claims()).split(".")[0]) * 3 // 4
    token = minter.token(header={"x5t": "A" * (2048 - size)})
    assert ACCEPTED == outcome(token, minter)


def test_a_payload_nested_16_deep_is_accepted(minter: Minter) -> None:
    nested = {"ext": [[[[[[[[[[[[[[[]]]]]]]]]]]]]]]}  # the payload object is level 1
    assert ACCEPTED == outcome(minter.token(claims=nested), minter)


def test_a_non_ascii_token_over_the_limit_in_bytes_is_refused(minter: Minter) -> None:
    with pytest.raises(TokenRejected) as raised:
        parse_token("é" * (MAX_TOKEN_BYTES // 2 + 1), minter.rules, NOW)
    assert "length" == raised.value.rule


def test_an_accepted_token_expires_at_its_exp(minter: Minter) -> None:
    token = minter.token()
    with pytest.raises(TokenRejected) as raised:
        parse_token(token, minter.rules, NOW + 3600)
    assert "exp" == raised.value.rule


def test_the_repr_of_a_parsed_token_shows_no_token_text(minter: Minter) -> None:
    token = minter.token()
    text = repr(parse_token(token, minter.rules, NOW))
    assert not any(part in text for part in token.split("."))
    assert SUBJECT not in text


def test_a_key_for_another_kid_is_refused(minter: Minter) -> None:
    token = parse_token(minter.token(minter.rsa), minter.rules, NOW)
    other = parse_jwks(minter.jwks())[minter.ec.kid]
    with pytest.raises(TokenRejected) as raised:
        verify_signature(token, other)
    assert "key-kid" == raised.value.rule
