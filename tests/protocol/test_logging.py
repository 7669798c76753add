"""One structured log event per tool call, on stderr, without message content or secrets."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from support.angelos_process import ROOT, angelos_command, clean_env

SECRET_QUERY = "TOP-SECRET-PHRASE-4711"


async def test_each_call_logs_operation_duration_and_outcome_without_content(
    services: Any, tmp_path: Path
) -> None:
    log_file = tmp_path / "stderr.log"
    command = " ".join(
        shlex.quote(part) for part in angelos_command("serve", "--transport", "stdio")
    )
    target = StdioServerParameters(
        command="sh",
        args=["-c", f"exec {command} 2>>{shlex.quote(str(log_file))}"],
        env=clean_env(dict(services.product_env)),
        cwd=ROOT,
    )
    async with Client(target) as client:
        await client.call_tool("mail_query", {"action": "folders"})
        await client.call_tool(
            "mail_query", {"action": "search", "search": {"query": SECRET_QUERY}, "bogus": 1}
        )
        await client.call_tool("mail_create", {"action": "folder", "name": SECRET_QUERY})
    text = log_file.read_text()
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    calls = [e for e in events if e.get("event") == "tool_call"]
    assert [
        ("mail_query", "folders", "ok"),
        ("mail_query", "", "invalid_arguments"),
        ("mail_create", "folder", "insufficient_scope"),
    ] == [(e["tool"], e["action"], e["outcome"]) for e in calls]
    assert all(isinstance(e["duration_ms"], float | int) for e in calls)
    assert SECRET_QUERY not in text
    assert services.password not in text
