"""What each probe is owed on each transport, and the checks every answer must pass."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from support.wire_probes import (
    BAD_PARAMS,
    INVALID,
    NOTIFICATION,
    OK,
    PARSE,
    RESPONSE,
    UNKNOWN_METHOD,
    Probe,
)

Key = tuple[str, int | str]  # (the id as JSON, the error code or "result")
# Only these may appear in an answer: JSON-RPC's own codes and the two MCP HTTP ones we provoke.
CODES = {PARSE, INVALID, UNKNOWN_METHOD, BAD_PARAMS, -32022}
LEAKS = ("Traceback", 'File "', ".py", "pydantic", "validation error", "Exception", "Error(")
LEGACY_ERAS = (None, "2025-11-25")
MODERN, UNKNOWN_ERA = "2026-07-28", "2099-01-01"
ERAS = [*LEGACY_ERAS, MODERN, UNKNOWN_ERA]


def key(request_id: Any, outcome: int | str) -> Key:
    return json.dumps(request_id), outcome


def stdio_expected(probe: Probe) -> Key | None:
    """The answer a probe gets on stdio; None for notifications, responses and blank lines."""
    if probe.category == "blank" or probe.kind in (NOTIFICATION, RESPONSE):
        return None
    return key(probe.id, "result" if probe.kind == OK else probe.kind)


def http_expected(probe: Probe, era: str | None) -> tuple[int, Key | None]:
    """The HTTP status and answer a probe gets when posted with this MCP-Protocol-Version."""
    if probe.category == "blank":
        return 400, key(None, PARSE)
    if probe.kind in (PARSE, INVALID):
        return 400, key(probe.id, probe.kind)
    if era == UNKNOWN_ERA:
        return 400, key(probe.id, -32022)
    if era == MODERN:  # a request without the envelope _meta; a posted response
        if probe.kind == NOTIFICATION:
            return 202, None
        return (400, key(None, INVALID)) if probe.kind == RESPONSE else (400, key(probe.id, -32602))
    if probe.kind in (NOTIFICATION, RESPONSE):
        return 202, None
    return 200, key(probe.id, "result" if probe.kind == OK else probe.kind)


def answer_key(answer: dict[str, Any]) -> Key:
    """Check one answer's envelope and wording; return its (id, outcome)."""
    assert "2.0" == answer.get("jsonrpc"), answer
    assert ("result" in answer) != ("error" in answer), answer
    if "result" in answer:
        assert isinstance(answer["result"], dict)
        return key(answer["id"], "result")
    error = answer["error"]
    assert error["code"] in CODES, answer
    message = error["message"]
    assert isinstance(message, str) and len(message) <= 160, message
    assert not any(leak in message for leak in LEAKS), message
    if error["code"] != UNKNOWN_METHOD:  # whose data echoes the method the client sent
        assert not any(leak in json.dumps(error.get("data")) for leak in LEAKS), answer
    return key(answer["id"], error["code"])


def tally(keys: list[Key | None]) -> Counter[Key]:
    return Counter(k for k in keys if k is not None)


def json_log_lines(text: str) -> list[dict[str, Any]]:
    """Every stderr line as a JSON object (fails on any other line)."""
    events = []
    for line in text.splitlines():
        event = json.loads(line)
        assert isinstance(event, dict), line
        events.append(event)
    return events
