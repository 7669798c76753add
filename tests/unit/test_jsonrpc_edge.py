"""screen(): JSON-RPC 2.0 codes for bad messages, limits before parsing, the SDK gets the rest."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import mcp_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.mime.compose.limits import MAX_ATTACHMENT_BASE64_CHARS, MAX_BODY_BYTES
from service.transports.jsonrpc_edge import (
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_MESSAGE_BYTES,
    MAX_VALUES,
    Accepted,
    EdgeError,
    screen,
)

PARSE, INVALID = -32700, -32600


def envelope(**members: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **members}).encode()


def call(arguments_json: bytes) -> bytes:
    head = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mail_prepare",'
    return head + b'"arguments":' + arguments_json + b"}}"


def verdict(raw: bytes) -> tuple[int, int | str | None] | str:
    """(code, id) of a refusal, or "accepted"."""
    result = screen(raw)
    return "accepted" if isinstance(result, Accepted) else (result.code, result.id)


class TestParseErrors:
    @pytest.mark.parametrize(
        "raw",
        [
            b"not json",
            b"",
            b'{"jsonrpc":"2.0","id":1,"method":"ping"',  # truncated
            b'{"jsonrpc":"2.0","id":1,"method":"ping"} {}',  # two messages on one line
            b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',  # a byte-order mark
            b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}',  # invalid UTF-8
            b'{"jsonrpc":"2.0","id":1,"method":"p\xed\xa0\x80"}',  # an encoded surrogate
            b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',  # a lone surrogate escape
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":NaN}}',
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1e400}}',
            b'{"jsonrpc":"2.0","id":' + b"1" * 4301 + b',"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"method":"a\x01b"}',  # a raw control character
            b"]]]]]]]]",
        ],
        ids=[
            "text",
            "empty",
            "truncated",
            "two",
            "bom",
            "utf8",
            "surrogate",
            "lone-escape",
            "nan",
            "1e400",
            "4301-digits",
            "control",
            "closers",
        ],
    )
    def test_unparseable_input_is_32700_with_a_null_id(self, raw: bytes) -> None:
        assert (PARSE, None) == verdict(raw)

    def test_an_integer_id_is_read_up_to_4300_characters_sign_included(self) -> None:
        head, tail = b'{"jsonrpc":"2.0","id":-', b',"method":"p"}'
        assert "accepted" == verdict(head + b"9" * 4299 + tail)
        assert (PARSE, None) == verdict(head + b"9" * 4300 + tail)

    def test_the_message_names_no_parser_detail(self) -> None:
        error = screen(b'{"jsonrpc": "2.0", "id": 1, "method": tru}')
        assert isinstance(error, EdgeError) and "Parse error" == error.message

    def test_the_answer_writes_the_null_id_out(self) -> None:
        error = screen(b"{")
        assert isinstance(error, EdgeError)
        expected = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error"},
        }
        assert expected == json.loads(error.encode())


class TestLimitsBeforeParsing:
    """Shapes that cost the SDK's parser up to seconds at 8 MiB are refused on a byte count."""

    ROOM = MAX_MESSAGE_BYTES - 200

    @pytest.mark.parametrize("unit", [b"0", b"{}", b"[]", b'""', b"1.5", b"true", b"null"])
    def test_millions_of_tiny_values_at_the_size_limit_are_refused(self, unit: bytes) -> None:
        raw = call(b"[" + b",".join([unit] * (self.ROOM // (len(unit) + 1))) + b"]")
        assert len(raw) <= MAX_MESSAGE_BYTES
        error = screen(raw)
        assert isinstance(error, EdgeError)
        assert (PARSE, f"Parse error: more than {MAX_VALUES} values") == (error.code, error.message)

    def test_one_value_under_the_limit_is_parsed(self) -> None:
        values = b",".join([b"0"] * (MAX_VALUES - 10))
        assert "accepted" == verdict(call(b'{"a":[' + values + b"]}"))

    def test_an_object_with_too_many_keys_is_refused(self) -> None:
        members = b",".join(b'"k%d":"v"' % i for i in range(MAX_VALUES))
        assert (PARSE, None) == verdict(call(b"{" + members + b"}"))

    def test_long_numbers_beyond_the_digit_budget_are_refused(self) -> None:
        digits = b",".join([b"9" * 4300] * (MAX_DIGITS // 4300 + 1))
        error = screen(call(b"[" + digits + b"]"))
        assert isinstance(error, EdgeError) and "digits" in error.message

    def test_nesting_to_the_depth_limit_is_parsed_and_one_more_is_refused(self) -> None:
        envelope_depth = 2  # the message and its params
        inner = MAX_DEPTH - envelope_depth
        assert "accepted" == verdict(call(b"[" * inner + b"]" * inner))
        error = screen(call(b"[" * (inner + 1) + b"]" * (inner + 1)))
        assert isinstance(error, EdgeError)
        assert f"Parse error: nesting deeper than {MAX_DEPTH}" == error.message

    def test_unclosed_nesting_a_megabyte_deep_is_refused(self) -> None:
        assert (PARSE, None) == verdict(b"[" * (1024 * 1024))

    def test_a_message_over_the_size_limit_is_refused(self) -> None:
        raw = call(b'"' + b"A" * MAX_MESSAGE_BYTES + b'"')
        error = screen(raw)
        assert isinstance(error, EdgeError) and "longer than 8 MiB" in error.message

    def test_separators_and_brackets_inside_strings_cost_nothing(self) -> None:
        # A 1 MiB body of CSV, code or escaped quotes is one value, whatever it contains.
        text = '{[,"\\],' * (MAX_BODY_BYTES // 8)
        assert "accepted" == verdict(call(json.dumps({"text": text}).encode()))

    def test_the_largest_legitimate_prepare_is_accepted(self) -> None:
        attachments = [{"filename": "a.bin", "content_base64": "A" * MAX_ATTACHMENT_BASE64_CHARS}]
        body = 'Zeile mit Umlauten äöü, "Zitaten" und Tabs\t\n' * (MAX_BODY_BYTES // 50)
        message = {"to": [f"r{i}@example.test" for i in range(50)], "text": body}
        arguments = {"action": "new", "message": {**message, "attachments": attachments}}
        raw = call(json.dumps(arguments).encode())
        assert 5 * 1024 * 1024 < len(raw) <= MAX_MESSAGE_BYTES
        assert "accepted" == verdict(raw)


class TestShapes:
    def test_a_batch_is_one_32600(self) -> None:
        batch = b"[" + envelope(id=1, method="ping") + b"," + envelope(id=2, method="ping") + b"]"
        error = screen(batch)
        assert isinstance(error, EdgeError)
        assert (INVALID, None, "Invalid Request: batches are not supported") == (
            error.code,
            error.id,
            error.message,
        )

    def test_an_empty_batch_is_32600(self) -> None:
        assert (INVALID, None) == verdict(b"[]")

    @pytest.mark.parametrize("raw", [b'"ping"', b"42", b"null", b"true"])
    def test_a_message_that_is_not_an_object_is_32600(self, raw: bytes) -> None:
        assert (INVALID, None) == verdict(raw)

    def test_a_request_with_a_null_id_is_refused_not_taken_as_a_notification(self) -> None:
        assert (INVALID, None) == verdict(envelope(id=None, method="tools/list"))

    @pytest.mark.parametrize("bad_id", [1.5, 1.0, True, {"a": 1}, [1]])
    def test_an_id_that_is_not_a_string_or_integer_is_32600(self, bad_id: Any) -> None:
        assert (INVALID, None) == verdict(envelope(id=bad_id, method="ping"))

    @pytest.mark.parametrize("version", [None, "1.0", 2.0])
    def test_a_missing_or_wrong_jsonrpc_member_is_32600_with_the_id(self, version: Any) -> None:
        members: dict[str, Any] = {"id": 5, "method": "ping"}
        if version is not None:
            members["jsonrpc"] = version
        assert (INVALID, 5) == verdict(json.dumps(members).encode())

    @pytest.mark.parametrize("method", [5, None, ["ping"]])
    def test_a_method_that_is_not_a_string_is_32600(self, method: Any) -> None:
        assert (INVALID, "r1") == verdict(envelope(id="r1", method=method))

    @pytest.mark.parametrize("params", [[1, 2], None, "x", 3])
    def test_params_that_are_not_an_object_are_32600(self, params: Any) -> None:
        assert (INVALID, 7) == verdict(envelope(id=7, method="tools/list", params=params))

    def test_a_request_carrying_a_result_is_32600(self) -> None:
        assert (INVALID, 3) == verdict(envelope(id=3, method="ping", result={}))

    def test_an_object_with_neither_method_result_nor_error_is_32600(self) -> None:
        assert (INVALID, 3) == verdict(envelope(id=3))

    def test_a_request_is_accepted_with_its_id(self) -> None:
        assert Accepted(12) == screen(envelope(id=12, method="tools/list", params={}))

    def test_a_notification_and_unknown_members_are_accepted(self) -> None:
        assert Accepted(None) == screen(envelope(method="notifications/initialized", x=1))

    def test_an_unknown_method_and_a_notification_with_an_id_are_left_to_the_sdk(self) -> None:
        assert Accepted(4) == screen(envelope(id=4, method="no/such"))
        assert Accepted(5) == screen(envelope(id=5, method="notifications/initialized"))

    def test_responses_from_the_client_are_accepted_when_well_formed(self) -> None:
        assert Accepted(None) == screen(envelope(id=1, result={}))
        assert Accepted(None) == screen(envelope(id=None, error={"code": -1, "message": "m"}))

    @pytest.mark.parametrize(
        "members",
        [
            {"id": 1, "result": []},
            {"result": {}},
            {"id": 1, "result": {}, "error": {"code": 1, "message": "m"}},
            {"error": {"code": 1, "message": "m"}},
            {"id": 1, "error": {"code": True, "message": "m"}},
            {"id": 1, "error": {"code": 1.5, "message": "m"}},
            {"id": 1, "error": {"code": 1}},
            {"id": 1, "error": "boom"},
        ],
    )
    def test_malformed_responses_are_32600(self, members: dict[str, Any]) -> None:
        result = screen(envelope(**members))
        assert isinstance(result, EdgeError) and INVALID == result.code


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=4,
)


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Seven draws in eight from `good`, the rest any JSON value."""
    return st.integers(0, 7).flatmap(lambda k: good if k else json_value)


small_object = st.dictionaries(st.text(max_size=4), json_value, max_size=3)
version = mostly(st.just("2.0"))
request_id = mostly(st.integers(-(2**70), 2**70) | st.text(max_size=4))
method = mostly(st.sampled_from(["ping", "tools/list", "notifications/initialized"]))
noise = {"params": mostly(small_object), "extra": json_value}
messages = st.one_of(
    st.fixed_dictionaries({"jsonrpc": version, "id": request_id, "method": method}, optional=noise),
    st.fixed_dictionaries({"jsonrpc": version, "method": method}, optional=noise),
    st.fixed_dictionaries({"jsonrpc": version, "id": request_id, "result": mostly(small_object)}),
    st.fixed_dictionaries(
        {
            "jsonrpc": version,
            "id": st.none() | request_id,
            "error": mostly(st.fixed_dictionaries({"code": st.integers(), "message": st.text()})),
        },
        optional={"result": small_object},
    ),
)


def test_whatever_is_accepted_the_sdk_reads_as_the_same_kind_of_message() -> None:
    kinds: Counter[str] = Counter()

    @settings(max_examples=500, deadline=None, database=None)
    @given(messages)
    def check(message: dict[str, Any]) -> None:
        raw = json.dumps(message).encode()
        if isinstance(screen(raw), EdgeError):
            kinds["refused"] += 1
            return
        parsed = mcp_types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
        if "method" in message and "id" in message:
            assert isinstance(parsed, mcp_types.JSONRPCRequest) and message["id"] == parsed.id
        elif "method" in message:
            assert isinstance(parsed, mcp_types.JSONRPCNotification)
        else:
            assert isinstance(parsed, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError)
        kinds[type(parsed).__name__] += 1

    check()
    print(f"screened messages by kind: {dict(kinds)}")
    assert {"refused", "JSONRPCRequest", "JSONRPCNotification"} <= set(kinds)
