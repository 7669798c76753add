"""Every token in the forgery catalogue is refused, by the rule and at the stage it names."""

from __future__ import annotations

import pytest

from service.auth.resource.jwks import parse_jwks
from service.auth.resource.jwt import TokenRejected, parse_token, verify_signature
from support.forgeries import BY_NAME
from support.tokens import ACCEPTED, Minter, outcome

NOW = 1_800_000_000
PARSE_TIME = [name for name, forgery in BY_NAME.items() if forgery.parse_time]
KEY_STAGE = [name for name, forgery in BY_NAME.items() if not forgery.parse_time]


@pytest.fixture
def minter() -> Minter:
    return Minter(now=NOW)


@pytest.mark.parametrize("name", BY_NAME)
def test_the_forged_token_is_refused_by_its_rule(name: str, minter: Minter) -> None:
    forgery = BY_NAME[name]
    assert forgery.rule == outcome(forgery.build(minter), minter)


@pytest.mark.parametrize("name", PARSE_TIME)
def test_parse_token_refuses_it_before_any_key_is_needed(name: str, minter: Minter) -> None:
    forgery = BY_NAME[name]
    with pytest.raises(TokenRejected) as raised:
        parse_token(forgery.build(minter), minter.rules, minter.now)
    assert forgery.rule == raised.value.rule


@pytest.mark.parametrize("name", KEY_STAGE)
def test_a_key_stage_forgery_is_well_formed_up_to_its_signature(name: str, minter: Minter) -> None:
    """These pass every parse-time rule, so only the key lookup or the signature refuses them."""
    forgery = BY_NAME[name]
    token = parse_token(forgery.build(minter), minter.rules, minter.now)
    assert minter.subject == token.claims.subject


@pytest.mark.parametrize("name", PARSE_TIME)
def test_the_rejection_carries_only_its_rule(name: str, minter: Minter) -> None:
    """No chained decoder error either: those hold the input text."""
    token = BY_NAME[name].build(minter)
    with pytest.raises(TokenRejected) as raised:
        parse_token(token, minter.rules, minter.now)
    assert ((raised.value.rule,), None, None) == (
        raised.value.args,
        raised.value.__cause__,
        raised.value.__context__,
    )


@pytest.mark.parametrize(
    "name", [name for name in KEY_STAGE if BY_NAME[name].rule != "unknown-kid"]
)
def test_a_signature_rejection_carries_only_its_rule(name: str, minter: Minter) -> None:
    token = parse_token(BY_NAME[name].build(minter), minter.rules, minter.now)
    with pytest.raises(TokenRejected) as raised:
        verify_signature(token, parse_jwks(minter.jwks())[token.kid])
    assert ((BY_NAME[name].rule,), None, None) == (
        raised.value.args,
        raised.value.__cause__,
        raised.value.__context__,
    )


def test_the_catalogue_covers_every_stage(minter: Minter) -> None:
    """The unmodified token of each key is accepted, so each forgery differs by its flaw only."""
    assert ACCEPTED == outcome(minter.token(minter.rsa), minter)
    assert ACCEPTED == outcome(minter.token(minter.ec), minter)
    assert {"unknown-kid", "signature", "signature-length", "key-alg"} == {
        BY_NAME[name].rule for name in KEY_STAGE
    }
