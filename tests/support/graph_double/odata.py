"""The OData query options the contract allows: $top, $skip, $select, $orderby and $filter.

$filter is a conjunction (` and `) of comparisons, at most one of them a parenthesised
disjunction (` or `); a comparison is one of receivedDateTime ge|lt <ISO-8601 Z>,
isRead eq true|false, flag/flagStatus eq|ne 'flagged', internetMessageId eq '<...>'.
Graph's rule for $orderby holds: the ordered property comes first in $filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from support.graph_double.errors import GraphError, bad_request
from support.graph_double.store import Summary

GRAPH_BASE = "https://graph.microsoft.com"
DEFAULT_TOP = 10
MAX_TOP = 1000
TOKEN = re.compile(r"\s*(\(|\)|'(?:[^']|'')*'|[^\s()]+)")
STRING = re.compile(r"'(?:[^']|'')*'")
DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,7})?Z")
INEFFICIENT = (
    "The restriction or sort order is too complex for this operation. "
    "Properties in $orderby must come first in $filter."
)

Test = Callable[[Summary], bool]


@dataclass(frozen=True)
class Comparison:
    """One `property operator value` of a $filter, ready to test a message."""

    prop: str
    test: Test


@dataclass(frozen=True)
class Query:
    """The query options of one collection or item request, checked."""

    top: int
    skip: int
    select: tuple[str, ...] | None
    descending: bool
    ordered: bool
    clauses: tuple[tuple[Comparison, ...], ...]  # AND of ORs

    def keeps(self, summary: Summary) -> bool:
        """Whether a message passes $filter."""
        return all(any(c.test(summary) for c in clause) for clause in self.clauses)


def _int(name: str, value: str, low: int, high: int) -> int:
    if not re.fullmatch(r"\d{1,7}", value) or not low <= int(value) <= high:
        raise bad_request(f"Invalid value '{value}' for query option '{name}'.")
    return int(value)


def _select(value: str, members: Sequence[str], entity: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(","))
    for n in names:
        if n not in members:
            raise bad_request(f"Could not find a property named '{n}' on type '{entity}'.")
    return names


def _comparison(prop: str, op: str, value: str) -> Comparison:
    if prop == "receivedDateTime" and op in ("ge", "lt") and DATETIME.fullmatch(value):
        when = datetime.fromisoformat(value[:19]).replace(tzinfo=UTC)
        if op == "ge":
            return Comparison(prop, lambda s: s.received >= when)
        return Comparison(prop, lambda s: s.received < when)
    if prop == "isRead" and op == "eq" and value in ("true", "false"):
        want = value == "true"
        return Comparison(prop, lambda s: ("\\seen" in s.flags) == want)
    if prop == "flag/flagStatus" and op in ("eq", "ne") and value == "'flagged'":
        want = op == "eq"
        return Comparison(prop, lambda s: ("\\flagged" in s.flags) == want)
    if prop == "internetMessageId" and op == "eq" and STRING.fullmatch(value):
        wanted = value[1:-1].replace("''", "'")
        return Comparison(prop, lambda s: s.internet_message_id == wanted)
    raise bad_request(f"Invalid filter clause: '{prop} {op} {value}'.")


def parse_filter(text: str) -> tuple[tuple[Comparison, ...], ...]:
    """$filter as an AND of ORs (400 BadRequest outside the contract's grammar)."""
    tokens = TOKEN.findall(text)
    clauses: list[tuple[Comparison, ...]] = []
    groups, i = 0, 0
    while True:
        if i < len(tokens) and tokens[i] == "(":
            groups += 1
            group: list[Comparison] = []
            i += 1
            while True:
                if len(tokens) < i + 4:
                    raise bad_request(f"Syntax error in $filter: '{text}'.")
                group.append(_comparison(*tokens[i : i + 3]))
                i += 3
                if tokens[i] == ")":
                    i += 1
                    break
                if tokens[i] != "or":
                    raise bad_request(f"Syntax error in $filter: '{text}'.")
                i += 1
            if len(group) < 2 or groups > 1:
                raise bad_request(f"Unsupported $filter: '{text}'.")
            clauses.append(tuple(group))
        else:
            if len(tokens) < i + 3:
                raise bad_request(f"Syntax error in $filter: '{text}'.")
            clauses.append((_comparison(*tokens[i : i + 3]),))
            i += 3
        if i == len(tokens):
            return tuple(clauses)
        if tokens[i] != "and":
            raise bad_request(f"Syntax error in $filter: '{text}'.")
        i += 1


def parse_query(
    query: Sequence[tuple[str, str]],
    allowed: Sequence[str],
    members: Sequence[str] = (),
    entity: str = "",
) -> Query:
    """The options of a request (an option outside `allowed` is a caller error, not ours)."""
    seen = [name for name, _ in query]
    if len(set(seen)) != len(seen):
        raise bad_request("A query option appears twice.")
    options = dict(query)
    unknown = set(options) - set(allowed)
    if unknown:
        raise GraphError(400, "BadRequest", f"Unsupported query option: {sorted(unknown)}.")
    top = _int("$top", options["$top"], 1, MAX_TOP) if "$top" in options else DEFAULT_TOP
    skip = _int("$skip", options["$skip"], 0, 10**7) if "$skip" in options else 0
    select = _select(options["$select"], members, entity) if "$select" in options else None
    descending, ordered = True, "$orderby" in options
    if ordered:
        m = re.fullmatch(r"receivedDateTime(?: (asc|desc))?", options["$orderby"].strip())
        if m is None:
            raise bad_request(f"Unsupported $orderby: '{options['$orderby']}'.")
        descending = m[1] == "desc"
    clauses = parse_filter(options["$filter"]) if "$filter" in options else ()
    if ordered and clauses and (len(clauses[0]) != 1 or clauses[0][0].prop != "receivedDateTime"):
        raise GraphError(400, "InefficientFilter", INEFFICIENT)
    return Query(top, skip, select, descending, ordered, clauses)


def next_link(path: str, query: Sequence[tuple[str, str]], skip: int) -> str:
    """The absolute @odata.nextLink for the page that starts at `skip`."""
    kept = [(n, v) for n, v in query if n != "$skip"] + [("$skip", str(skip))]
    encoded = "&".join(f"{quote(n, safe='$')}={quote(v, safe='')}" for n, v in kept)
    return f"{GRAPH_BASE}{path}?{encoded}"
