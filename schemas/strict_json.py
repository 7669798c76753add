"""Strict JSON for tokens, key sets and settings; hand-written as PyJWT and joserfc take repeats.

Both libraries let a repeated member name silently win (measured), which would let a token say
two things at once; this parser refuses it, and keeps integer literals apart from other numbers.
With `casefold_names`, names equal under Unicode case folding (`client_id` and `CLIENT_ID`)
count as repeats too: a reader that matches names case-insensitively would take either.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_MAX_DEPTH = 16
_WHITESPACE = " \t\r\n"  # JSON's four; str.strip() alone would take more
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_FOLD_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(sorted(set(range(128)) - set(b"[]{}")))


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


def _members_casefolded(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = _members(pairs)
    if len({name.casefold() for name in members}) != len(members):
        raise StrictJsonError("case-fold-duplicate-member")
    return members


_DECODER = json.JSONDecoder(
    object_pairs_hook=_members, parse_float=_non_integer, parse_constant=_non_finite
)
_CASEFOLD_DECODER = json.JSONDecoder(
    object_pairs_hook=_members_casefolded, parse_float=_non_integer, parse_constant=_non_finite
)


def parse_object(
    data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, casefold_names: bool = False
) -> dict[str, Any]:
    """Parse one JSON object under the strict rules, or raise StrictJsonError."""
    value = _parse(data, max_depth, casefold_names, dict)
    assert isinstance(value, dict)
    return value


def parse_array(
    data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, casefold_names: bool = False
) -> list[Any]:
    """Parse one JSON array under the strict rules, or raise StrictJsonError."""
    value = _parse(data, max_depth, casefold_names, list)
    assert isinstance(value, list)
    return value


def _parse(
    data: bytes, max_depth: int, casefold_names: bool, top: type[dict[str, Any]] | type[list[Any]]
) -> dict[str, Any] | list[Any]:
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
        decoder = _CASEFOLD_DECODER if casefold_names else _DECODER
        value, end = decoder.raw_decode(text, len(text) - len(text.lstrip(_WHITESPACE)))
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
    if not isinstance(value, top):
        raise StrictJsonError("not-object" if top is dict else "not-array")
    if not _within_depth(text, max_depth):
        raise StrictJsonError("depth")
    if _has_lone_surrogate(text, value):
        raise StrictJsonError("lone-surrogate")
    return value


def _within_depth(text: str, max_depth: int) -> bool:
    """Tell whether valid JSON nests no deeper than max_depth, in C-speed passes over its text.

    With strings removed and braces folded into brackets, each pass of `replace` deletes the
    innermost pairs only, so a document of depth d is empty after exactly d passes. (A walk
    over the parsed tree costs a Python step per container, several times slower.)
    """
    skeleton = _STRING.sub("", text).encode("ascii").translate(_FOLD_BRACKETS, _NOT_BRACKETS)
    for _ in range(max_depth):
        skeleton = skeleton.replace(b"[]", b"")
        if not skeleton:
            return True
    return False


def _has_lone_surrogate(text: str, value: dict[str, Any] | list[Any]) -> bool:
    """Tell whether a \\uD800-style escape left a lone surrogate: valid JSON, but not Unicode."""
    if _SURROGATE_ESCAPE.search(text) is None:
        return False
    try:  # the C encoder walks the tree; UTF-8 refuses a lone surrogate
        json.dumps(value, ensure_ascii=False, default=lambda _: None).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
