"""Secret: a credential that never shows itself by accident."""

from __future__ import annotations

import copy
import json
import pickle

import msgspec
import pytest

from schemas.secret import Secret

VALUE = "correct horse battery staple"


class TestRedaction:
    def test_repr_and_str_are_redacted(self) -> None:
        """repr, str and f-strings show a placeholder, never the value."""
        secret = Secret(VALUE)
        for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}", format(secret)):
            assert VALUE not in text
            assert text == "Secret('***')"

    def test_reveal_returns_the_value(self) -> None:
        """reveal() is the one way to read the credential."""
        assert Secret(VALUE).reveal() == VALUE

    def test_container_repr_is_redacted(self) -> None:
        """A Secret inside a list or a Struct keeps its redaction."""

        class Holder(msgspec.Struct, frozen=True):
            password: Secret

        assert VALUE not in repr([Secret(VALUE)])
        assert VALUE not in repr(Holder(Secret(VALUE)))


class TestEquality:
    def test_equal_by_value(self) -> None:
        """Two Secrets holding the same string are equal and hash alike."""
        assert Secret(VALUE) == Secret(VALUE)
        assert hash(Secret(VALUE)) == hash(Secret(VALUE))

    def test_different_values_differ(self) -> None:
        """Different values are not equal."""
        assert Secret(VALUE) != Secret(VALUE + "!")

    def test_never_equal_to_a_plain_string(self) -> None:
        """A Secret is not equal to the str it wraps (no accidental comparisons)."""
        assert Secret(VALUE) != VALUE

    def test_lone_surrogates_compare(self) -> None:
        """Values carrying surrogate escapes from the environment still compare."""
        assert Secret("a\udcff") == Secret("a\udcff")


class TestNotSerialisable:
    def test_msgspec_json_refuses(self) -> None:
        """msgspec without an enc_hook refuses to encode a Secret."""
        with pytest.raises(TypeError):
            msgspec.json.encode({"password": Secret(VALUE)})

    def test_msgspec_msgpack_refuses(self) -> None:
        """msgpack encoding refuses too."""
        with pytest.raises(TypeError):
            msgspec.msgpack.encode(Secret(VALUE))

    def test_stdlib_json_refuses(self) -> None:
        """json.dumps refuses a Secret."""
        with pytest.raises(TypeError):
            json.dumps(Secret(VALUE))

    def test_pickle_refuses(self) -> None:
        """Pickling would write the credential to bytes, so it is refused."""
        with pytest.raises(TypeError):
            pickle.dumps(Secret(VALUE))

    def test_copy_returns_the_same_object(self) -> None:
        """copy and deepcopy work (immutable value) without going through pickling."""
        secret = Secret(VALUE)
        assert copy.copy(secret) is secret
        assert copy.deepcopy({"k": secret})["k"] is secret


class TestImmutable:
    def test_attributes_cannot_be_set(self) -> None:
        """The wrapped value cannot be replaced or deleted."""
        secret = Secret(VALUE)
        with pytest.raises(AttributeError):
            secret._value = "other"
        with pytest.raises(AttributeError):
            del secret._value

    def test_only_strings_are_wrapped(self) -> None:
        """Wrapping a non-str is a programming error."""
        with pytest.raises(TypeError):
            Secret(b"bytes")  # type: ignore[arg-type]
