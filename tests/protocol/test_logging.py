"""One structured log event per tool call, on stderr, without message content or secrets."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from support.angelos_process import ROOT, angelos_command, clean_env, http_server
from support.raw_http import JSON_HEADERS, exchange, request_bytes

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


LIBRARY_LOGS = """
import asyncio, logging, warnings
from service.logging import configure_logging
configure_logging()
try:
    raise ValueError("private text from a request")
except ValueError:
    logging.getLogger("mcp.server.streamable_http").exception("Error in standalone SSE response")
warnings.warn("a library warning")
async def main():
    async def fails():
        raise RuntimeError("in a task")
    task = asyncio.get_running_loop().create_task(fails())
    await asyncio.sleep(0.01)
asyncio.run(main())
raise SystemError("uncaught")
"""


def test_library_records_warnings_and_crashes_are_one_json_object_per_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", LIBRARY_LOGS], cwd=ROOT, capture_output=True, timeout=60
    )
    events = [json.loads(line) for line in proc.stderr.decode().splitlines()]
    assert [
        ("mcp.server.streamable_http", "error", "ValueError"),
        ("py.warnings", "warning", None),
        ("asyncio", "error", "RuntimeError"),
        (None, "critical", "SystemError"),
    ] == [(e.get("logger"), e["level"], e.get("error_type")) for e in events]
    assert "private text from a request" not in proc.stderr.decode()
    assert all("Traceback" not in e["event"] for e in events)


async def test_the_http_server_logs_only_json_lines_through_bad_requests(
    services: Any, tmp_path: Path
) -> None:
    log_file = tmp_path / "stderr.log"
    bodies = [b"{", b"[]", b'{"jsonrpc":"2.0","id":null,"method":"x"}', b"\xff"]
    with (
        log_file.open("wb") as err,
        http_server(services.product_env, "--insecure-local-owner", "t", stderr=err) as base,
    ):
        port = int(base.rsplit(":", 1)[1])
        host = ("Host", f"127.0.0.1:{port}")
        requests = [request_bytes("GET", "/mcp", [host, ("Accept", "text/event-stream")])]
        requests += [request_bytes("POST", "/mcp", [host, *JSON_HEADERS], b) for b in bodies]
        requests.append(request_bytes("POST", "/mcp", [("Host", "x:99999"), *JSON_HEADERS]))
        statuses = [(await exchange("127.0.0.1", port, raw)).status for raw in requests]
        # A client that leaves in the middle of a body.
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request_bytes("POST", "/mcp", [host, *JSON_HEADERS], b"{" * 100)[:-50])
        await writer.drain()
        writer.close()
        await asyncio.sleep(0.5)
    assert [405, 400, 400, 400, 400, 400] == statuses
    lines = log_file.read_text().splitlines()
    assert lines, "the server logs at least its start"
    assert all(isinstance(json.loads(line), dict) for line in lines), lines
