"""The ledger's Lua scripts (§8.7), loaded as package data with the lifecycle table rendered in."""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib import resources
from typing import Final

from ledger.lifecycle import TRANSITIONS, Guard
from schemas.ledger import ANNOTATION_TYPES, DISPATCH_TERMINAL_TYPES, FILING_RESULT_TYPES

SCRIPT_NAMES: Final = ("prepare", "claim", "append")
_MARKER: Final = "--@LIFECYCLE@"
_WORD = re.compile(r"[A-Za-z_|]+", re.ASCII)


def _quoted(word: str) -> str:
    if _WORD.fullmatch(word) is None:  # everything rendered is a fixed identifier
        raise ValueError("lifecycle names must be plain identifiers")
    return f"'{word}'"


def _set(words: frozenset[str] | tuple[str, ...]) -> str:
    return "{" + ", ".join(f"[{_quoted(w)}] = true" for w in sorted(words)) + "}"


def _guard(guard: Guard) -> str:
    return "{" + ", ".join(f"{{{_quoted(name)}, {_set(values)}}}" for name, values in guard) + "}"


def lifecycle_lua() -> str:
    """Render the transition table and the event-type sets as Lua table constructors."""
    lines = ["local TRANSITIONS = {"]
    for (state, kind), rule in TRANSITIONS.items():
        when = "{" + ", ".join(_guard(g) for g in rule.when) + "}"
        need = f"'{rule.need}'" if rule.need else "''"
        lines.append(
            f"  [{_quoted(state + '|' + kind)}] = "
            f"{{to = {_quoted(rule.to)}, need = {need}, when = {when}}},"
        )
    lines.append("}")
    lines.append(f"local ANNOTATIONS = {_set(ANNOTATION_TYPES)}")
    lines.append(f"local DISPATCH_TERMINAL = {_set(DISPATCH_TERMINAL_TYPES)}")
    lines.append(f"local FILING_RESULT = {_set(FILING_RESULT_TYPES)}")
    return "\n".join(lines)


def _read(name: str) -> str:
    return resources.files("ledger").joinpath("scripts", f"{name}.lua").read_text("utf-8")


@cache
def script_source(name: str) -> str:
    """Return the full source of one script: the shared prelude, then the script body."""
    if name not in SCRIPT_NAMES:
        raise ValueError(f"no ledger script named {name!r}")
    prelude = _read("common")
    if _MARKER not in prelude:
        raise RuntimeError("the ledger script prelude lost its lifecycle marker")
    return prelude.replace(_MARKER, lifecycle_lua(), 1) + "\n" + _read(name)


def script_sha(name: str) -> str:
    """Return the SHA-1 Redis uses to name a loaded script."""
    return hashlib.sha1(script_source(name).encode("utf-8")).hexdigest()
