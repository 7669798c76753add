"""The JSON-RPC 2.0 checks every inbound message passes before the mcp SDK sees it.

The SDK parses with pydantic and is answer-less or wordy on bad input: on stdio an unparseable
line gets no reply at all, `"id": null` turns a request into a notification, a batch gets a
-32602 with a validation dump, and an 8 MiB message of tiny values holds the event loop for
seconds. `screen()` refuses all of these with JSON-RPC's own codes and short fixed messages, so
whatever it lets through is a single, well-shaped message the SDK handles as before: unknown
methods (-32601) and bad params (-32602) stay the SDK's answers.

Cost: a message is at most MAX_MESSAGE_BYTES; before any parsing, C-speed counts over the raw
bytes (quotes, then separators, brackets and digits outside strings) refuse more than MAX_VALUES
values, nesting deeper than MAX_DEPTH and more than MAX_DIGITS digits in numbers. Parsing, by us
and again by the SDK, is then bounded by the bytes of at most that many values
(bench/wire_parse.py prints the figures at the limit).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

MIB: Final = 1024 * 1024
# The largest legitimate message is a mail_prepare with 3 MiB of attachments (4 MiB of base64),
# a 1 MiB body (up to 2 MiB once JSON-escaped) and 50 recipients: about 6.2 MiB.
MAX_MESSAGE_BYTES: Final = 8 * MIB
# Our widest valid call has a few hundred values (50 recipients, 20 attachments, 100 references);
# initialize and _meta fewer. A parser may limit sizes and nesting (RFC 8259 §9).
MAX_VALUES: Final = 10_000
MAX_DEPTH: Final = 64  # the SDK's own parser stops at 200
# Decimal to int conversion is quadratic in the digits (CPython caps a literal at 4,300); a
# total cap keeps the numbers of one message cheap. Ours are uids, modseqs and ids (<= 20 digits).
MAX_DIGITS: Final = 100_000
# Above this size screen() and the SDK's parse take milliseconds each: transports let the event
# loop run between the two, so neither adds to the other's hold.
YIELD_ABOVE: Final = MIB

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600

RequestId = str | int
_WHITESPACE: Final = b" \t\r\n"
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_DIGITS: Final = b"0123456789"
_DEPTH_STEP: Final = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_DECODE = msgspec.json.Decoder()


class EdgeError(msgspec.Struct, frozen=True):
    """A JSON-RPC error to answer instead of passing the message on."""

    code: int
    message: str
    id: RequestId | None = None
    data: Any = None

    def encode(self) -> bytes:
        """The JSON-RPC error response, with `"id": null` written out as the spec requires."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return msgspec.json.encode({"jsonrpc": "2.0", "id": self.id, "error": error})


class Accepted(msgspec.Struct, frozen=True):
    """A message the SDK may handle; `id` is the request's id (None for other kinds)."""

    id: RequestId | None


def parse_error(reason: str = "") -> EdgeError:
    """-32700 with a fixed reason."""
    return EdgeError(PARSE_ERROR, f"Parse error: {reason}" if reason else "Parse error")


def invalid_request(reason: str, request_id: RequestId | None = None) -> EdgeError:
    """-32600 with a fixed reason; the id is echoed when it could be read."""
    return EdgeError(INVALID_REQUEST, f"Invalid Request: {reason}", request_id)


TOO_LONG: Final = parse_error(f"message longer than {MAX_MESSAGE_BYTES // MIB} MiB")
TOO_MANY_VALUES: Final = parse_error(f"more than {MAX_VALUES} values")


def screen(raw: bytes) -> Accepted | EdgeError:
    """Check one raw message: within the limits, valid UTF-8 JSON, one well-shaped message."""
    if len(raw) > MAX_MESSAGE_BYTES:
        return TOO_LONG
    refused = _over_limits(raw)
    if refused is not None:
        return refused
    try:
        message = _DECODE.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):  # also invalid UTF-8, 1e400
        return parse_error()
    if isinstance(message, list):
        return invalid_request("batches are not supported")
    if not isinstance(message, dict):
        return invalid_request("a message must be a JSON object")
    return _shape(message)


def _over_limits(raw: bytes) -> EdgeError | None:
    """Count values, digits and depth on the raw bytes, without building any object.

    For valid JSON the counts are exact: with each string reduced to one letter and whitespace
    dropped, every value but the first is a comma's right-hand side or the first element of a
    non-empty container. For anything else they bound the work before the parser fails.
    """
    # Drop escaped backslashes, then escaped quotes: every quote left delimits a string.
    bare = raw.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in raw else raw
    if bare.count(b'"') > 4 * MAX_VALUES + 4:  # a key and a string value per value at most
        return TOO_MANY_VALUES
    outside = b"s".join(bare.split(b'"')[0::2])
    commas = outside.count(b",")
    if commas >= MAX_VALUES:  # each comma has a value after it: no need to count further
        return TOO_MANY_VALUES
    outside = outside.translate(None, _WHITESPACE)
    openers = outside.count(b"[") + outside.count(b"{")
    empty = outside.count(b"[]") + outside.count(b"{}")
    if 1 + commas + openers - empty > MAX_VALUES:
        return TOO_MANY_VALUES
    if len(outside) - len(outside.translate(None, _DIGITS)) > MAX_DIGITS:
        return parse_error(f"more than {MAX_DIGITS} digits in numbers")
    brackets = outside.translate(None, _NOT_BRACKETS)
    if len(brackets) > 2 * openers:  # more closers than openers: not JSON, and unbounded
        return parse_error()
    depth = deepest = 0
    for byte in brackets:
        depth += _DEPTH_STEP[byte]
        deepest = max(deepest, depth)
    if deepest > MAX_DEPTH:
        return parse_error(f"nesting deeper than {MAX_DEPTH}")
    return None


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _shape(message: dict[str, Any]) -> Accepted | EdgeError:
    """Tell requests, notifications and responses apart by their members (JSON-RPC 2.0 §4, §5)."""
    has_id = "id" in message
    request_id = message.get("id")
    echo = request_id if _valid_id(request_id) else None
    if message.get("jsonrpc") != "2.0":
        return invalid_request('"jsonrpc" must be "2.0"', echo)
    if "method" in message:
        if "result" in message or "error" in message:
            return invalid_request("a request carries no result or error", echo)
        if has_id and request_id is None:
            return invalid_request("a request id must not be null")
        if has_id and echo is None:
            return invalid_request("id must be a string or an integer")
        if not isinstance(message["method"], str):
            return invalid_request("method must be a string", echo)
        if not isinstance(message.get("params", {}), dict):
            return invalid_request("params must be an object", echo)
        return Accepted(echo)
    if ("result" in message) == ("error" in message):
        return invalid_request("a message needs a method, a result or an error", echo)
    if "result" in message:
        if echo is None or not isinstance(message["result"], dict):
            return invalid_request("a result needs an id and an object", echo)
        return Accepted(None)
    if not has_id or (request_id is not None and echo is None):
        return invalid_request("an error response needs an id (null allowed)", echo)
    if not _error_object(message["error"]):
        return invalid_request("an error needs an integer code and a message", echo)
    return Accepted(None)


def _error_object(error: object) -> bool:
    if not isinstance(error, dict):
        return False
    code = error.get("code")
    return type(code) is int and isinstance(error.get("message"), str)
