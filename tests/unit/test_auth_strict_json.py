"""The strict JSON parser behind tokens and key sets."""

from __future__ import annotations

import pytest

from schemas.strict_json import NonInteger, StrictJsonError, parse_array, parse_object


def refusal(data: bytes, max_depth: int = 16, casefold_names: bool = False) -> str:
    with pytest.raises(StrictJsonError) as raised:
        parse_object(data, max_depth=max_depth, casefold_names=casefold_names)
    assert (None, None) == (raised.value.__cause__, raised.value.__context__)
    return raised.value.rule


def nested(depth: int) -> bytes:
    """An object whose innermost container sits at `depth` (the top object is depth 1)."""
    return b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def test_a_plain_object_parses() -> None:
    assert {"a": 1, "b": ["x", None, True], "c": {}} == parse_object(
        b' {"a":1,"b":["x",null,true],"c":{}}\r\n'
    )


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1,"a":1}',
        b'{"a":{"b":1,"b":2}}',
        b'{"a":[{"b":1},{"c":[{"d":{"e":0,"e":0}}]}]}',
    ],
)
def test_duplicate_members_at_any_depth_are_refused(data: bytes) -> None:
    assert "duplicate-member" == refusal(data)


def test_member_names_are_case_sensitive() -> None:
    assert {"iss": 1, "ISS": 2} == parse_object(b'{"iss":1,"ISS":2}')


def test_the_same_name_in_sibling_objects_is_fine() -> None:
    assert {"a": {"x": 1}, "b": {"x": 2}} == parse_object(b'{"a":{"x":1},"b":{"x":2}}')


def test_depth_16_parses() -> None:
    assert "a" in parse_object(nested(16))


def test_depth_17_is_refused() -> None:
    assert "depth" == refusal(nested(17))


def test_a_depth_limit_can_be_lowered() -> None:
    assert "depth" == refusal(nested(3), max_depth=2)


def test_nesting_far_past_the_recursion_limit_is_refused() -> None:
    assert "depth" == refusal(b'{"a":' + b"[" * 100_000)


@pytest.mark.parametrize("data", [b'{"a":1}{}', b'{"a":1} x', b'{"a":1},', b"{}\x00"])
def test_trailing_data_is_refused(data: bytes) -> None:
    assert "trailing-data" == refusal(data)


@pytest.mark.parametrize("data", [b'{"a":"\xff"}', b'{"a":"\xc3"}', b'{"a":"\xed\xa0\x80"}'])
def test_invalid_utf8_is_refused(data: bytes) -> None:
    assert "utf-8" == refusal(data)


def test_an_escaped_lone_surrogate_is_refused() -> None:
    assert "lone-surrogate" == refusal(b'{"a":["\\ud800"]}')


def test_an_escaped_surrogate_pair_is_a_character() -> None:
    assert {"a": "\U0001f600"} == parse_object(b'{"a":"\\ud83d\\ude00"}')


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_numbers_are_refused(literal: bytes) -> None:
    assert "non-finite-number" == refusal(b'{"a":' + literal + b"}")


@pytest.mark.parametrize("data", [b"[]", b'"a"', b"1", b"null"])
def test_a_top_level_other_than_an_object_is_refused(data: bytes) -> None:
    assert "not-object" == refusal(data)


@pytest.mark.parametrize(
    "data", [b"", b"{", b"{'a':1}", b'{"a":01}', b'{"a":1,}', b'{"a":"\t"}', b"\xef\xbb\xbf{}"]
)
def test_malformed_json_is_refused(data: bytes) -> None:
    assert "syntax" == refusal(data)


@pytest.mark.parametrize("literal", [b"1.0", b"1e3", b"1E+3", b"-0.5", b"0.0"])
def test_a_number_with_a_fraction_or_exponent_is_no_integer(literal: bytes) -> None:
    assert isinstance(parse_object(b'{"a":' + literal + b"}")["a"], NonInteger)


@pytest.mark.parametrize(
    ("literal", "value"), [(b"0", 0), (b"-7", -7), (b"1800000000", 1800000000)]
)
def test_an_integer_literal_is_an_int(literal: bytes, value: int) -> None:
    assert value == parse_object(b'{"a":' + literal + b"}")["a"]


def test_an_integer_over_the_digit_limit_is_refused_not_converted() -> None:
    assert "syntax" == refusal(b'{"a":' + b"9" * 5000 + b"}")


def test_the_error_message_is_the_rule_only() -> None:
    with pytest.raises(StrictJsonError) as raised:
        parse_object(b'{"secret-value":1,"secret-value":2}')
    assert "duplicate-member" == str(raised.value)


@pytest.mark.parametrize(
    "data",
    [
        b'{"client_id":1,"CLIENT_ID":2}',
        b'{"a":[{"Client_Id":1,"client_iD":2}]}',
        b'{"stra\xc3\x9fe":1,"STRASSE":2}',  # full folding: sharp s folds to ss
        b'{"kid":1,"\xe2\x84\xaaid":2}',  # KELVIN SIGN folds to k
    ],
)
def test_case_fold_aliases_are_refused_when_asked(data: bytes) -> None:
    assert "case-fold-duplicate-member" == refusal(data, casefold_names=True)


def test_case_fold_aliases_are_distinct_names_by_default() -> None:
    assert {"client_id": 1, "CLIENT_ID": 2} == parse_object(b'{"client_id":1,"CLIENT_ID":2}')


def test_an_exact_repeat_stays_a_duplicate_member_when_folding() -> None:
    assert "duplicate-member" == refusal(b'{"a":1,"a":2}', casefold_names=True)


def test_an_array_parses_under_the_same_rules() -> None:
    assert [{"a": 1}, []] == parse_array(b' [{"a":1},[]] ')


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"{}", "not-array"),
        (b"1", "not-array"),
        (b'[{"a":1,"a":2}]', "duplicate-member"),
        (b'[{"a":1,"A":2}]', "case-fold-duplicate-member"),
        (b"[] []", "trailing-data"),
        (b"[" * 33 + b"]" * 33, "depth"),
    ],
)
def test_an_array_refuses_what_an_object_would(data: bytes, rule: str) -> None:
    with pytest.raises(StrictJsonError) as raised:
        parse_array(data, max_depth=32, casefold_names=True)
    assert (None, None) == (raised.value.__cause__, raised.value.__context__)
    assert rule == raised.value.rule


def test_an_array_at_the_depth_limit_parses() -> None:
    assert 1 == len(parse_array(b"[" * 32 + b"]" * 32, max_depth=32))
