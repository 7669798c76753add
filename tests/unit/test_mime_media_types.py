"""The one Content-Type and Content-Disposition parser: strict for drafts, lenient for mail."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.mime.media_types import (
    Disposition,
    MediaType,
    format_parameters,
    parse_disposition,
    parse_media_type,
)


def lenient(value: str) -> MediaType:
    return parse_media_type(value, strict=False)


class TestStrict:
    def test_tokens_quoted_values_and_an_encoded_value_are_read(self) -> None:
        value = 'Text/Plain; Charset=UTF-8; name="a \\"b\\"; c"; title*=utf-8\'\'caf%C3%A9;'
        params = {"charset": "UTF-8", "name": 'a "b"; c', "title": "café"}
        assert MediaType("text/plain", params) == parse_media_type(value, strict=True)

    @pytest.mark.parametrize(
        "value",
        [
            "text",
            "text/plain; name",
            "text/plain; name=a b",
            "text/plain; a=1;; b=2",
            'text/plain; name="open',
            "text/plain; name=a; NAME=b",
            "text/plain; name*0=a; name*1=b",
            "text/plain; name*=iso-8859-1''caf%E9",
            "text/plain; boundary=----=_Part_1",
        ],
    )
    def test_anything_outside_the_grammar_is_refused(self, value: str) -> None:
        with pytest.raises(ValueError):
            parse_media_type(value, strict=True)

    def test_a_disposition_needs_a_token_kind(self) -> None:
        assert Disposition("attachment", {"filename": "a.txt"}) == parse_disposition(
            'Attachment; filename="a.txt"', strict=True
        )
        with pytest.raises(ValueError):
            parse_disposition("attach ment", strict=True)


class TestLenient:
    def test_an_unquoted_value_may_hold_any_character_but_a_semicolon(self) -> None:
        value = "multipart/mixed; boundary=----=_Part_1 x"
        assert {"boundary": "----=_Part_1 x"} == lenient(value).params

    def test_rfc2231_sections_are_joined_in_order_and_decoded_in_their_charset(self) -> None:
        value = "text/plain; name*1*=%E9.txt; name*0*=iso-8859-1'fr'caf"
        assert {"name": "café.txt"} == lenient(value).params

    def test_a_name_given_whole_and_in_sections_is_read_once(self) -> None:
        assert {"name": "ab"} == lenient("text/plain; name*=utf-8''a; name*0*=b").params

    def test_a_plain_parameter_wins_over_an_encoded_one_of_the_same_name(self) -> None:
        value = "text/plain; name*=utf-8''r%C3%A9el; name=fallback"
        assert {"name": "fallback"} == lenient(value).params

    def test_the_first_of_repeated_parameters_wins(self) -> None:
        assert {"charset": "utf-8"} == lenient("text/plain; charset=utf-8; charset=koi8-r").params

    def test_pieces_without_a_value_or_a_valid_name_are_skipped(self) -> None:
        assert {"b": "2"} == lenient('text/plain; a; b=2; =3; x y=4; "c"=5').params

    def test_a_semicolon_inside_quotes_is_text_even_when_the_quote_is_unterminated(self) -> None:
        assert {"name": "a;b", "x": '"c;d'} == lenient('text/plain; name="a;b"; x="c;d').params

    def test_a_missing_or_malformed_type_is_empty(self) -> None:
        assert ("", "", "") == (
            lenient("").essence,
            lenient("text").essence,
            lenient("text / plain").essence,
        )

    @given(st.text(max_size=200))
    def test_never_raises(self, value: str) -> None:
        assert isinstance(lenient(value), MediaType)
        assert isinstance(parse_disposition(value, strict=False), Disposition)


class TestFormat:
    def test_for_the_wire_names_are_sorted_and_non_ascii_is_rfc2231(self) -> None:
        params = {"name": "café", "charset": "utf-8", "title": "a b"}
        assert "text/plain; charset=utf-8; name*=utf-8''caf%C3%A9; title=\"a b\"" == (
            format_parameters("text/plain", params)
        )

    def test_for_display_the_order_is_kept_and_every_value_stays_text(self) -> None:
        params = {"name": "café", "charset": "utf-8"}
        assert 'text/plain; name="café"; charset=utf-8' == (
            format_parameters("text/plain", params, wire=False)
        )
