"""Message-ID lists for threading: parse source IDs strictly, build and bound References."""

from __future__ import annotations

import re
from collections.abc import Sequence

from providers.mime.compose import limits
from providers.mime.compose.text_rules import normalize_message_id

_ID_TOKEN = re.compile(r"<[^<>]*>|[^\s<>]+")


def strip_comments(value: str) -> str | None:
    """Remove RFC 5322 comments (nested, with quoted pairs); None when one is unbalanced."""
    out: list[str] = []
    depth = 0
    index = 0
    while index < len(value):
        ch = value[index]
        if ch == "\\" and depth:
            index += 2
            continue
        if ch == "(":
            depth += 1
            out.append(" ")
        elif ch == ")":
            if not depth:
                return None
            depth -= 1
        elif not depth:
            out.append(ch)
        index += 1
    return None if depth else "".join(out)


def parse_id_list(value: str) -> list[str] | None:
    """Parse a References/In-Reply-To value into bracketed IDs; None when any token is garbage."""
    text = strip_comments(value)
    if text is None:
        return None
    ids: list[str] = []
    position = 0
    for match in _ID_TOKEN.finditer(text):
        if text[position : match.start()].strip():
            return None
        position = match.end()
        normalized = normalize_message_id(match.group(0))
        if normalized is None:
            return None
        ids.append(normalized)
    if text[position:].strip():
        return None
    return ids


def parse_single_id(value: str) -> str | None:
    """Return the one valid Message-ID of a Message-Id header value, or None."""
    ids = parse_id_list(value)
    return ids[0] if ids is not None and len(ids) == 1 else None


def references_fit(chain: Sequence[str]) -> bool:
    """Tell whether a chain is within 100 IDs and 8 KiB joined by single spaces."""
    return (
        len(chain) <= limits.MAX_REFERENCES
        and len(" ".join(chain).encode("ascii")) <= limits.MAX_REFERENCES_BYTES
    )


def bound_references(chain: Sequence[str]) -> tuple[list[str], bool]:
    """Drop the second ID until the chain fits, keeping the root and the most recent ones."""
    bounded = list(chain)
    trimmed = False
    while len(bounded) > 2 and not references_fit(bounded):
        del bounded[1]
        trimmed = True
    return bounded, trimmed


def reply_chain(parent: str, prior: Sequence[str]) -> list[str]:
    """Drop exact duplicates and the parent from the prior chain, then append the parent."""
    seen = {parent}
    chain: list[str] = []
    for message_id in prior:
        if message_id not in seen:
            seen.add(message_id)
            chain.append(message_id)
    chain.append(parent)
    return chain
