"""The ledger's Lua scripts, loaded as package data with the lifecycle table rendered in."""

from __future__ import annotations

import re
from typing import Final, get_args

from ledger.lifecycle import AWAITS_EVIDENCE, HALT_BLOCKED, TRANSITIONS, UNCLAIMED, Guard
from ledger.store.lua_scripts import LuaScripts
from schemas.ledger_events import ANNOTATION_TYPES, DISPATCH_TERMINAL_TYPES, FILING_RESULT_TYPES
from schemas.send_policy import ApprovalMode, RequiredApproval, accepts

SCRIPT_NAMES: Final = ("prepare", "claim", "append", "guard", "acknowledge")
_MARKER: Final = "--@LIFECYCLE@"
_WORD = re.compile(r"[A-Za-z_|]+", re.ASCII)


def _quoted(word: str) -> str:
    if _WORD.fullmatch(word) is None:  # everything rendered is a fixed identifier
        raise ValueError("lifecycle names must be plain identifiers")
    return f"'{word}'"


def _set(words: frozenset[str] | tuple[str, ...]) -> str:
    return "{" + ", ".join(f"[{_quoted(w)}] = true" for w in sorted(words)) + "}"


def _guard_expression(guard: Guard) -> str:
    return " and ".join(
        "(" + " or ".join(f"data.{_field(name)} == {_quoted(v)}" for v in values) + ")"
        for name, values in guard
    )


def _field(name: str) -> str:
    if _WORD.fullmatch(name) is None or "|" in name:
        raise ValueError("guard fields must be plain identifiers")
    return name


def lifecycle_lua() -> str:
    """Render the transition table as flat Lua tables plus one generated guard function.

    Flat tables and a function (instead of nested rule tables) keep the per-call cost low:
    Redis rebuilds every script-local table on each call.
    """
    lines = ["local NEXT = {"]
    lines += [f"  [{_quoted(f'{s}|{t}')}] = {_quoted(r.to)}," for (s, t), r in TRANSITIONS.items()]
    lines.append("}")
    lines.append("local NEED = {")
    lines += [
        f"  [{_quoted(f'{s}|{t}')}] = {_quoted(r.need)},"
        for (s, t), r in TRANSITIONS.items()
        if r.need
    ]
    lines.append("}")
    lines.append("local function guards_hold(key, data)")
    for (state, kind), rule in TRANSITIONS.items():
        if rule.when:
            alternatives = " or ".join(f"({_guard_expression(g)})" for g in rule.when)
            lines.append(f"  if key == {_quoted(f'{state}|{kind}')} then")
            lines.append(f"    return {alternatives}")
            lines.append("  end")
    lines.append("  return true")
    lines.append("end")
    lines.append(f"local ANNOTATIONS = {_set(ANNOTATION_TYPES)}")
    lines.append(f"local DISPATCH_TERMINAL = {_set(DISPATCH_TERMINAL_TYPES)}")
    lines.append(f"local FILING_RESULT = {_set(FILING_RESULT_TYPES)}")
    lines.append(f"local HALT_BLOCKED = {_set(HALT_BLOCKED)}")
    lines.append(f"local AWAITS_EVIDENCE = {_set(AWAITS_EVIDENCE)}")
    lines.append(f"local UNCLAIMED = {_set(UNCLAIMED)}")
    pairs = frozenset(
        f"{required}|{mode}"
        for required in get_args(RequiredApproval)
        for mode in get_args(ApprovalMode)
        if accepts(required, mode)
    )
    lines.append(f"local ACCEPTS = {_set(pairs)}")
    return "\n".join(lines)


def _with_lifecycle(prelude: str) -> str:
    if _MARKER not in prelude:
        raise RuntimeError("the ledger script prelude lost its lifecycle marker")
    return prelude.replace(_MARKER, lifecycle_lua(), 1)


SCRIPTS: Final = LuaScripts("ledger.store", SCRIPT_NAMES, prelude=_with_lifecycle)
