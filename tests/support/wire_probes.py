"""Generated raw JSON-RPC messages for the wire fuzz tests, each with the answer it is owed.

A probe is the exact bytes put on the wire (never containing a newline) plus its kind, which
fixes the answer: the edge refuses PARSE (-32700) and INVALID (-32600) itself; the SDK answers
UNKNOWN_METHOD (-32601), BAD_PARAMS (-32602) and OK (a result); NOTIFICATION and RESPONSE get
no answer on stdio. Kinds come from how a probe was built, not from re-parsing it, except for
free-form garbage, whose kind the stdlib json module decides.
"""

from __future__ import annotations

import json
import math
from string import ascii_letters
from typing import Any, NamedTuple

from hypothesis import assume
from hypothesis import strategies as st

PARSE, INVALID, UNKNOWN_METHOD, BAD_PARAMS = -32700, -32600, -32601, -32602
OK, NOTIFICATION, RESPONSE = "ok", "notification", "response"
MAX_VALUES, MAX_DEPTH = 10_000, 64  # service/transports/jsonrpc_edge.py

RequestId = int | str


class Probe(NamedTuple):
    """Bytes for the wire, what kind of message they are, the id an answer must carry."""

    raw: bytes
    kind: int | str
    id: RequestId | None
    category: str


def encode(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


ids = st.one_of(
    st.integers(-(2**53), 2**53),
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=12),
)
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8"), max_size=10),
)
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)
# "_meta" is the one params member the SDK itself reads; a bad one is its -32602.
objects = st.dictionaries(
    st.text(max_size=5).filter(lambda k: k != "_meta"), json_value, max_size=3
)
unknown_methods = st.one_of(
    st.text(max_size=20).map(lambda t: "x/" + t),
    # Methods the SDK knows but angelos does not serve (checked: -32601, not -32602).
    st.sampled_from(["resources/list", "prompts/list", "roots/list", "tasks/list", ""]),
)


def request(method: str, request_id: RequestId, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, **extra}


@st.composite
def valid_messages(draw: st.DrawFn) -> dict[str, Any]:
    """Well-formed messages of every kind, as material for breaking."""
    return draw(
        st.one_of(
            st.builds(request, st.just("ping"), ids),
            st.builds(request, unknown_methods, ids, params=objects),
            st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "method": unknown_methods}),
            st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": ids, "result": objects}),
        )
    )


# --- malformed JSON and invalid UTF-8 -----------------------------------------------------------

INVALID_UTF8 = [
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xc0\xaf",  # overlong "/"
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\xc3",  # a truncated sequence
    b"\xf0\x9f\x98",
]


@st.composite
def malformed_json(draw: st.DrawFn) -> Probe:
    raw = encode(draw(valid_messages()))
    how = draw(st.sampled_from(["truncate", "insert", "trail", "two", "quotes", "constant", "bom"]))
    if how == "truncate":  # every proper prefix of an object is unparseable
        broken = raw[: draw(st.integers(1, len(raw) - 1))]
    elif how == "insert":
        at = draw(st.integers(0, len(raw)))
        broken = (
            raw[:at] + draw(st.sampled_from([b"{", b"}", b"[", b"]", b",", b":", b'"'])) + raw[at:]
        )
        assume(not _parses(broken))
    elif how == "trail":
        broken = raw + draw(st.sampled_from([b"x", b",", b"}", b"\x00", b"// c"]))
    elif how == "two":
        broken = raw + raw
    elif how == "quotes":
        broken = raw.replace(b'"', b"'")
    elif how == "constant":
        constant = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"undefined"]))
        broken = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":' + constant + b"}}"
    else:
        broken = b"\xef\xbb\xbf" + raw
    return Probe(broken, PARSE, None, "malformed JSON")


@st.composite
def invalid_utf8(draw: st.DrawFn) -> Probe:
    raw = encode(draw(valid_messages()))
    at = draw(st.integers(0, len(raw)))
    return Probe(
        raw[:at] + draw(st.sampled_from(INVALID_UTF8)) + raw[at:], PARSE, None, "invalid UTF-8"
    )


@st.composite
def garbage(draw: st.DrawFn) -> Probe:
    """Free-form bytes or text: unparseable, or well-formed JSON that is no message."""
    raw = draw(
        st.binary(min_size=1, max_size=64) | st.text(min_size=1, max_size=64).map(str.encode)
    )
    raw = raw.replace(b"\n", b"")
    assume(raw.strip())
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return Probe(raw, PARSE, None, "malformed JSON")
    assume(not isinstance(value, dict))
    if not _representable(value):
        return Probe(raw, PARSE, None, "malformed JSON")
    return Probe(raw, INVALID, None, "wrong shape")


def _no_constants(name: str) -> None:
    raise ValueError(name)


def _representable(value: Any) -> bool:
    """False for what json accepts but is no Unicode or no number: "\\ud800", 1e400 (inf)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return all(_representable(v) for v in value)
    return True


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return False
    return True


# --- wrong JSON-RPC shapes and batches -----------------------------------------------------------

not_version = json_value.filter(lambda v: v != "2.0")
bad_ids = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)),
    st.floats(-1e6, 1e6).filter(lambda f: f == int(f)).map(float),  # 1.0 is no integer
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
not_string = json_value.filter(lambda v: not isinstance(v, str))
not_object = json_value.filter(lambda v: not isinstance(v, dict))


@st.composite
def wrong_shapes(draw: st.DrawFn) -> Probe:
    i = draw(ids)
    method = draw(unknown_methods)
    shapes: list[tuple[Any, RequestId | None]] = [
        ({"id": i, "method": method}, i),
        ({"jsonrpc": draw(not_version), "id": i, "method": method}, i),
        ({"jsonrpc": "2.0", "id": draw(bad_ids), "method": method}, None),
        ({"jsonrpc": "2.0", "id": i, "method": draw(not_string)}, i),
        ({"jsonrpc": "2.0", "id": i, "method": method, "params": draw(not_object)}, i),
        ({"jsonrpc": "2.0", "method": method, "params": draw(not_object)}, None),
        ({"jsonrpc": "2.0", "id": i, "method": method, "result": draw(objects)}, i),
        ({"jsonrpc": "2.0", "id": i}, i),
        ({"jsonrpc": "2.0"}, None),
        ({"jsonrpc": "2.0", "id": i, "result": draw(not_object)}, i),
        ({"jsonrpc": "2.0", "result": draw(objects)}, None),
        ({"jsonrpc": "2.0", "id": i, "result": {}, "error": {"code": 1, "message": "m"}}, i),
        ({"jsonrpc": "2.0", "error": {"code": 1, "message": "m"}}, None),
        ({"jsonrpc": "2.0", "id": i, "error": {"code": draw(not_integer), "message": "m"}}, i),
        ({"jsonrpc": "2.0", "id": i, "error": draw(not_object)}, i),
    ]
    message, echoed = draw(st.sampled_from(shapes))
    return Probe(encode(message), INVALID, echoed, "wrong shape")


not_integer = json_value.filter(lambda v: not isinstance(v, int) or isinstance(v, bool))


@st.composite
def batches(draw: st.DrawFn) -> Probe:
    members = draw(st.lists(valid_messages() | json_value, max_size=4))
    return Probe(encode(members), INVALID, None, "batch")


# --- messages the SDK answers: unknown methods, ids on notifications, bad params -------------


@st.composite
def unknown_method_requests(draw: st.DrawFn) -> Probe:
    i = draw(ids)
    message = request(draw(unknown_methods), i, params=draw(objects))
    return Probe(encode(message), UNKNOWN_METHOD, i, "unknown method")


notification_methods = st.one_of(
    st.sampled_from(["initialized", "cancelled", "progress", "message"]), st.text(max_size=8)
)


@st.composite
def sdk_requests(draw: st.DrawFn) -> Probe:
    """Notifications carrying ids (requests for unknown methods), bad params, valid pings."""
    i = draw(ids)
    choices = [
        (request("notifications/" + draw(notification_methods), i), UNKNOWN_METHOD,
         "notification with an id"),
        (request("tools/call", i, params=draw(bad_call_params)), BAD_PARAMS, "bad params"),
        (request("ping", i, params=draw(objects)), OK, "valid"),
    ]  # fmt: skip
    message, kind, category = draw(st.sampled_from(choices))
    return Probe(encode(message), kind, i, category)


@st.composite
def unanswered(draw: st.DrawFn) -> Probe:
    """Notifications (known or not) and the client's responses: no answer is owed."""
    notification = draw(unknown_methods | notification_methods.map(lambda m: "notifications/" + m))
    choices = [
        ({"jsonrpc": "2.0", "method": notification}, NOTIFICATION, "notification"),
        ({"jsonrpc": "2.0", "id": draw(ids), "result": draw(objects)}, RESPONSE, "response"),
        ({"jsonrpc": "2.0", "id": draw(st.none() | ids), "error": {"code": 1, "message": "m"}},
         RESPONSE, "response"),
    ]  # fmt: skip
    message, kind, category = draw(st.sampled_from(choices))
    return Probe(encode(message), kind, None, category)


# The SDK quotes an unknown tool's name in its message: letters only, so no false "leak".
no_tool = st.text(ascii_letters, max_size=8).map(lambda t: "no_tool_" + t)
bad_call_params = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"name": not_string}),
    st.fixed_dictionaries({"name": no_tool}),
    st.fixed_dictionaries(
        {"name": st.just("mail_query"), "arguments": not_object.filter(lambda v: v is not None)}
    ),
)


# --- huge numbers, deep nesting, too many values ------------------------------------------------


@st.composite
def huge_numbers(draw: st.DrawFn) -> Probe:
    digits = draw(st.integers(19, 4299))  # msgspec takes 4,300 characters, a sign included
    big = int(draw(st.sampled_from("123456789")) + "0" * (digits - 1)) * draw(
        st.sampled_from([1, -1])
    )
    how = draw(st.sampled_from(["id", "param", "too long", "exponent", "budget"]))
    if how == "id":
        return Probe(encode(request("ping", big)), OK, big, "huge number")
    if how == "param":
        return Probe(encode(request("ping", 7, params={"n": big})), OK, 7, "huge number")
    if how == "too long":  # more digits than any parser here converts
        raw = (
            b'{"jsonrpc":"2.0","id":' + b"9" * draw(st.integers(4301, 6000)) + b',"method":"ping"}'
        )
        return Probe(raw, PARSE, None, "huge number")
    if how == "exponent":
        exponent = draw(st.sampled_from([b"1e309", b"-1e400", b"1E+99999", b"12345e678"]))
        raw = b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"n":' + exponent + b"}}"
        return Probe(raw, PARSE, None, "huge number")
    numbers = b",".join([b"9" * 4000] * 26)  # over 100,000 digits in all
    return Probe(b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"n":[' + numbers + b"]}}",
                 PARSE, None, "huge number")  # fmt: skip


@st.composite
def deep_nesting(draw: st.DrawFn) -> Probe:
    i = draw(st.integers(0, 2**31))
    depth = draw(st.integers(0, MAX_DEPTH - 2) | st.integers(MAX_DEPTH - 1, 3000))
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    head = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"n":' % i
    raw = head + opener * depth + b"0" + closer * depth + b"}}"
    kind, echoed = (OK, i) if depth + 2 <= MAX_DEPTH else (PARSE, None)
    if draw(st.booleans()):  # the same depth as a bare batch of arrays
        raw, echoed = b"[" * (depth + 1) + b"]" * (depth + 1), None
        kind = INVALID if depth + 1 <= MAX_DEPTH else PARSE
    return Probe(raw, kind, echoed, "deep nesting")


@st.composite
def many_values(draw: st.DrawFn) -> Probe:
    i = draw(st.integers(0, 2**31))
    count = draw(st.integers(0, MAX_VALUES - 1000) | st.integers(MAX_VALUES, 2 * MAX_VALUES))
    unit = draw(st.sampled_from([b"0", b"{}", b"[]", b'""', b"true"]))
    values = b"[" + b",".join([unit] * count) + b"]"
    raw = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"n":' % i + values + b"}}"
    return (
        Probe(raw, OK, i, "many values")
        if count < MAX_VALUES
        else Probe(raw, PARSE, None, "many values")
    )


@st.composite
def blank(draw: st.DrawFn) -> Probe:
    """Whitespace only: no message on stdio (skipped), an empty body over HTTP."""
    return Probe(draw(st.sampled_from([b" ", b"\t", b"\r", b"  \r"])), NOTIFICATION, None, "blank")


probes = st.one_of(
    malformed_json(),
    invalid_utf8(),
    garbage(),
    wrong_shapes(),
    batches(),
    unknown_method_requests(),
    sdk_requests(),
    unanswered(),
    huge_numbers(),
    deep_nesting(),
    many_values(),
    blank(),
)


def unique_ids(batch: list[Probe]) -> bool:
    """No two answered probes of one batch share an id (answers are matched by id)."""
    answered = [json.dumps(p.id) for p in batch if p.id is not None]
    return len(answered) == len(set(answered))
