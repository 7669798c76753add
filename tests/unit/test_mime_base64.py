"""The one base64 decoder pair: strict (exact data) and lenient (whatever can be read)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.mime.base64_decoding import decode_lenient, decode_strict, lenient_size


class TestStrict:
    def test_padded_alphabet_data_decodes(self) -> None:
        assert b"hello" == decode_strict(b"aGVsbG8=")

    @pytest.mark.parametrize(
        "data", [b"aGVsbG8", b"aGVs bG8=", b"aGVsbG8=\r\n", b"aGVsbG8==", b"aGVsbG8=aGVs", b"=aGV"]
    )
    def test_anything_but_exact_padded_data_is_refused(self, data: bytes) -> None:
        with pytest.raises(ValueError):
            decode_strict(data)

    def test_nonzero_unused_bits_pass_unless_canonical_is_asked(self) -> None:
        assert b"hello" == decode_strict(b"aGVsbG9=")
        with pytest.raises(ValueError):
            decode_strict(b"aGVsbG9=", canonical=True)

    @given(st.binary(max_size=200))
    def test_every_standard_encoding_is_canonical(self, data: bytes) -> None:
        assert data == decode_strict(base64.b64encode(data), canonical=True)


class TestLenient:
    def test_bytes_outside_the_alphabet_are_ignored(self) -> None:
        assert b"hello" == decode_lenient(b"aGV*s\r\nbG8=\x00")

    def test_a_cut_final_group_is_completed_and_a_lone_sextet_dropped(self) -> None:
        assert (b"hello", b"hel") == (decode_lenient(b"aGVsbG8"), decode_lenient(b"aGVsQ"))

    @given(st.binary(max_size=300))
    def test_the_size_is_the_length_of_the_decoded_bytes(self, data: bytes) -> None:
        assert len(decode_lenient(data)) == lenient_size(data)

    @given(st.binary(max_size=200))
    def test_it_agrees_with_strict_decoding_on_valid_data(self, data: bytes) -> None:
        encoded = base64.encodebytes(data)
        assert decode_strict(encoded.replace(b"\n", b"")) == decode_lenient(encoded)
