"""`angelos demo`: start the server over stdio and show the mailbox through a real MCP client."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp import Client, StdioServerParameters

from schemas.discovery import compact_bytes, tool_entries


def _show(title: str, value: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(value, indent=2, ensure_ascii=False))


async def run_demo() -> int:
    """Run one stdio session: discovery, capabilities, folders; print what came back."""
    target = StdioServerParameters(
        command=sys.executable,
        args=["-m", "service.cli", "serve", "--transport", "stdio"],
        env=dict(os.environ),
    )
    async with Client(target, mode="auto") as client:
        print(f"connected: protocol {client.protocol_version}")
        tools = (await client.list_tools()).tools
        print(f"tools: {', '.join(t.name for t in tools)}")
        print(f"complete discovery: {len(compact_bytes(tool_entries()))} bytes")
        for action in ("capabilities", "folders"):
            result = await client.call_tool("mail_query", {"action": action})
            _show(
                f"mail_query {action}" + (" (error)" if result.is_error else ""),
                result.structured_content,
            )
            if result.is_error:
                return 1
    return 0
