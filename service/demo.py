"""`angelos demo`: start the server over stdio and show the mailbox through a real MCP client.

Read-only by default. With ANGELOS_DEMO_SEND=1 (what `make demo` sets for its throwaway
mailbox) it also prepares one message, confirms it once, shows its status and shows that a
second confirm is a replay that sends nothing.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp import Client, StdioServerParameters

from schemas.discovery import compact_bytes, tool_entries


def _show(title: str, value: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(value, indent=2, ensure_ascii=False)[:3000])


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    body: dict[str, Any] = result.structured_content or {}
    label = arguments.get("action", tool)
    _show(f"{tool} {label}" + (" (error)" if result.is_error else ""), body)
    if result.is_error:
        raise SystemExit(1)
    return body


async def run_demo() -> int:
    """Run one stdio session: discovery, capabilities, folders, a search and a read."""
    sending = os.environ.get("ANGELOS_DEMO_SEND") == "1"
    env = dict(os.environ)
    if sending:
        env.update(MAIL_ENABLE_SEND="1", ANGELOS_LOCAL_SCOPES="mail.read mail.send")
    target = StdioServerParameters(
        command=sys.executable, args=["-m", "service.cli", "serve", "--transport", "stdio"], env=env
    )
    async with Client(target, mode="auto") as client:
        print(f"connected: protocol {client.protocol_version}")
        tools = (await client.list_tools()).tools
        print(f"tools: {', '.join(t.name for t in tools)}")
        print(f"complete discovery: {len(compact_bytes(tool_entries()))} bytes")
        await _call(client, "mail_query", {"action": "capabilities"})
        await _call(client, "mail_query", {"action": "folders"})
        page = await _call(client, "mail_query", {"action": "search", "search": {"limit": 3}})
        if page.get("messages"):
            reference = {
                "folder": page["folder"],
                "uid_validity": page["uid_validity"],
                "uid": page["messages"][0]["uid"],
            }
            await _call(client, "mail_query", {"action": "read", "reference": reference})
        if sending:
            await _send_once(client)
    return 0


async def _send_once(client: Client) -> None:
    message = {"to": ["bob@example.test"], "subject": "Demo", "text": "Sent exactly once."}
    preview = await _call(client, "mail_prepare", {"action": "new", "message": message})
    confirm = {
        "prepared_id": preview["prepared_id"],
        "confirmed_digest": preview["digest"],
        "append_sent": False,
    }
    await _call(client, "mail_send_confirmed", confirm)
    status = {"action": "send_status", "prepared_id": preview["prepared_id"]}
    await _call(client, "mail_query", status)
    await _call(client, "mail_send_confirmed", confirm)  # a replay: nothing is sent again
