"""`angelos demo`: start the server over stdio and walk through the mailbox with a real MCP client.

Each step prints one line: what was asked, what came back, and what that shows. `--json`
prints the raw results instead, one JSON object per line. Read-only by default; with
ANGELOS_DEMO_SEND=1 (what `make demo` sets for its throwaway mailbox) it also prepares one
message, confirms it once, reads its status, and confirms it again to show that nothing is sent
twice.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from mcp import Client, StdioServerParameters

from schemas.discovery import DISCOVERY_BUDGET_BYTES, compact_bytes, tool_entries

Describe = Callable[[dict[str, Any]], str]


class Walk:
    """Runs the demo's calls and reports each one, as text for people or JSON for machines."""

    def __init__(self, client: Client, *, as_json: bool) -> None:
        self.client = client
        self.as_json = as_json
        self.step = 0

    def say(self, asked: str, answer: str, shows: str, raw: Any) -> None:
        """Report one step."""
        self.step += 1
        if self.as_json:
            print(json.dumps({"step": self.step, "asked": asked, "result": raw}))
        else:
            print(f"{self.step:>2}. {asked} -> {answer}\n    {shows}")

    async def call(
        self, tool: str, arguments: dict[str, Any], asked: str, describe: Describe, shows: str
    ) -> dict[str, Any]:
        """Call one tool and report it; an error result ends the demo."""
        result = await self.client.call_tool(tool, arguments)
        body: dict[str, Any] = result.structured_content or {}
        if result.is_error:
            self.say(asked, f"error {body.get('error_code')}: {body.get('error')}", "", body)
            raise SystemExit(1)
        self.say(asked, describe(body), shows, body)
        return body


async def run_demo(*, as_json: bool = False, sending: bool = False) -> int:
    """Run one stdio session: discovery, capabilities, folders, a search, a read (and a send).

    The server gets this process's environment, ANGELOS_ENV_FILE included; with `sending`
    (ANGELOS_DEMO_SEND=1) it also gets the send gate and scope.
    """
    env = dict(os.environ)
    if sending:
        env.update(MAIL_ENABLE_SEND="1", ANGELOS_LOCAL_SCOPES="mail.read mail.send")
    target = StdioServerParameters(
        command=sys.executable, args=["-m", "service.cli", "serve", "--transport", "stdio"], env=env
    )
    async with Client(target, mode="auto") as client:
        walk = Walk(client, as_json=as_json)
        tools = [tool.name for tool in (await client.list_tools()).tools]
        size = len(compact_bytes(tool_entries()))
        walk.say(
            "list the tools",
            f"{len(tools)} tools ({', '.join(tools)}), {size:,} bytes of discovery",
            f"the whole tool surface fits the {DISCOVERY_BUDGET_BYTES:,}-byte budget "
            f"(protocol {client.protocol_version})",
            {"tools": tools, "discovery_bytes": size},
        )
        await walk.call(
            "mail_query", {"action": "capabilities"}, "what may this server do?",
            _capabilities, "the operator's gates are reported before anything is tried",
        )  # fmt: skip
        await walk.call(
            "mail_query", {"action": "folders"}, "which folders are there?",
            lambda b: f"{len(b.get('folders', []))} folders",
            "folders come with their roles, so nothing is guessed from names",
        )  # fmt: skip
        page = await walk.call(
            "mail_query", {"action": "search", "search": {"limit": 3}},
            "the 3 newest messages of the inbox",
            lambda b: f"{len(b.get('messages', []))} summaries from {b.get('folder')}",
            "each summary carries an exact reference: folder, UIDVALIDITY and UID",
        )  # fmt: skip
        if page.get("messages"):
            reference = {
                "folder": page["folder"],
                "uid_validity": page["uid_validity"],
                "uid": page["messages"][0]["uid"],
            }
            await walk.call(
                "mail_query", {"action": "read", "reference": reference},
                f"read UID {reference['uid']}",
                lambda b: f"{len(str(b.get('text', '')))} characters of text",
                "a read names the exact message; a changed folder would refuse it",
            )  # fmt: skip
        if sending:
            await _send_once(walk)
    return 0


def _capabilities(body: dict[str, Any]) -> str:
    gates = {
        "send": body.get("send_enabled"),
        "writes": body.get("mailbox_writes_enabled"),
        "delete": body.get("permanent_delete_enabled"),
    }
    return ", ".join(f"{name} {'on' if on else 'off'}" for name, on in gates.items())


async def _send_once(walk: Walk) -> None:
    message = {"to": ["bob@example.test"], "subject": "Demo", "text": "Sent exactly once."}
    preview = await walk.call(
        "mail_prepare", {"action": "new", "message": message}, "prepare a message to bob",
        lambda b: f"prepared {b.get('prepared_id')}, digest {str(b.get('digest'))[:12]}...",
        "nothing is sent yet: the owner reviews this exact preview and its digest",
    )  # fmt: skip
    confirm = {
        "prepared_id": preview["prepared_id"],
        "confirmed_digest": preview["digest"],
        "append_sent": False,
    }
    await walk.call(
        "mail_send_confirmed", confirm, "confirm it with its digest",
        lambda b: f"status {b.get('status')}",
        "accepted by the SMTP server once; the ledger recorded each step before it happened",
    )  # fmt: skip
    await walk.call(
        "mail_query", {"action": "send_status", "prepared_id": preview["prepared_id"]},
        "ask for its status", lambda b: f"status {b.get('status')}",
        "the status is a projection of the hash-chained ledger, not a guess",
    )  # fmt: skip
    await walk.call(
        "mail_send_confirmed", confirm, "confirm it again",
        lambda b: f"status {b.get('status')}, resent {str(b.get('resent')).lower()}",
        "a second confirm is a replay: the message is never sent twice",
    )  # fmt: skip
