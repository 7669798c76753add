"""Strict JSON for tokens and key sets, hand-written because PyJWT and joserfc accept duplicates.

Both libraries let a repeated member name silently win (measured), which would let a token say
two things at once; this parser refuses it, and keeps integer literals apart from other numbers.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_DEPTH = 16
_WHITESPACE = " \t\r\n"  # JSON's four; str.strip() alone would take more


class StrictJsonError(ValueError):
    """A document broke a strict-JSON rule; the message is the rule's short name only."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


class NonInteger:
    """What a number with a fraction or exponent becomes, so 1.0 never passes for 1."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NonInteger()"


_NON_INTEGER = NonInteger()


def _non_integer(_literal: str) -> NonInteger:
    return _NON_INTEGER


def _non_finite(_literal: str) -> NonInteger:
    raise StrictJsonError("non-finite-number")


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise StrictJsonError("duplicate-member")
    return members


_DECODER = json.JSONDecoder(
    object_pairs_hook=_members, parse_float=_non_integer, parse_constant=_non_finite
)


def parse_object(data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """Parse one JSON object under the strict rules, or raise StrictJsonError."""
    # Each refusal is raised outside its `except` block, so the error chains no decoder
    # exception (those hold the input text) as its __context__.
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:
        raise StrictJsonError("utf-8")
    rule = ""
    try:
        value, end = _DECODER.raw_decode(text, len(text) - len(text.lstrip(_WHITESPACE)))
    except StrictJsonError as error:  # raised by a hook, with no context of its own
        rule = error.rule
    except RecursionError:
        rule = "depth"
    except ValueError:  # JSONDecodeError, or an integer literal over Python's digit limit
        rule = "syntax"
    if rule:
        raise StrictJsonError(rule)
    if text[end:].strip(_WHITESPACE):
        raise StrictJsonError("trailing-data")
    if not isinstance(value, dict):
        raise StrictJsonError("not-object")
    _check_tree(value, max_depth)
    return value


def _check_tree(root: dict[str, Any], max_depth: int) -> None:
    """Walk the parsed tree once: bound the nesting and refuse strings that are not Unicode."""
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise StrictJsonError("depth")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(key, str):
                _check_text(key)
            if isinstance(child, str):
                _check_text(child)
            elif isinstance(child, dict | list):
                stack.append((child, depth + 1))


def _check_text(text: str) -> None:
    """Refuse a lone surrogate from a \\uD800-style escape: valid JSON text, but not Unicode."""
    if not text.isascii() and not _encodable(text):
        raise StrictJsonError("lone-surrogate")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
