"""`angelos demo`: start the server over stdio and walk through the mailbox with a real MCP client.

Each step prints one line: what was asked, what came back, and what that shows. `--json`
prints the raw results instead, one JSON object per line. Read-only by default; with
ANGELOS_DEMO_SEND=1 (what `make demo` sets for its throwaway mailbox) it also prepares one
message, confirms it once, reads its status, and confirms it again to show that nothing is sent
twice. It ends with `angelos ledger show` of that message and `angelos ledger verify`, run as the
real commands against the same store. The server's log lines (and this process's own) go to a
file the demo names at its start and at its end, so the terminal holds only the walk-through.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import msgspec
import structlog
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from schemas.discovery import DISCOVERY_BUDGET_BYTES, compact_bytes, tool_entries
from service.commands.demo_ledger import as_result, as_text, run_ledger
from service.logging import configure_logging

Describe = Callable[[dict[str, Any]], str]
NEXT = (
    "Connect your own MCP client (Claude Desktop, Claude Code, VS Code, Cursor) to your own "
    "mailbox: docs/deployment.md."
)


class Stopped(Exception):
    """A step failed; the walk-through has already said how."""


class Walk:
    """Runs the demo's calls and reports each one, as text for people or JSON for machines."""

    def __init__(self, client: Client, *, as_json: bool) -> None:
        self.client = client
        self.as_json = as_json
        self.step = 0

    def heading(self, title: str) -> None:
        """Start a part of the walk-through (text only)."""
        if not self.as_json:
            print(f"\n== {title} ==")

    def say(self, asked: str, answer: str, shows: str, raw: Any) -> None:
        """Report one step."""
        self.step += 1
        if self.as_json:
            print(json.dumps({"step": self.step, "asked": asked, "result": raw}))
        else:
            print(f"{self.step:>2}. {asked} -> {answer}" + (f"\n    {shows}" if shows else ""))

    async def call(
        self, tool: str, arguments: dict[str, Any], asked: str, describe: Describe, shows: str
    ) -> dict[str, Any]:
        """Call one tool and report it; an error result ends the demo."""
        result = await self.client.call_tool(tool, arguments)
        body: dict[str, Any] = result.structured_content or {}
        if result.is_error:
            self.say(asked, f"error {body.get('error_code')}: {body.get('error')}", "", body)
            raise Stopped
        self.say(asked, describe(body), shows, body)
        return body


async def run_demo(*, as_json: bool = False, sending: bool = False) -> int:
    """Run one stdio session: discovery, capabilities, folders, a search, a read (and a send),
    then the ledger commands; returns the exit status (0 only when every step came out clean).

    The server gets this process's environment, ANGELOS_ENV_FILE included; with `sending`
    (ANGELOS_DEMO_SEND=1) it also gets the send gate and scope.
    """
    env = dict(os.environ)
    if sending:
        env.update(MAIL_ENABLE_SEND="1", ANGELOS_LOCAL_SCOPES="mail.read mail.send")
    # Outside the services' own directory (scripts/test-services removes that when it stops),
    # so the log is still there to read after `make demo` has finished.
    log_path = Path(tempfile.mkdtemp(prefix="angelos-demo-")) / "server.log"
    # With --json, standard output holds the JSON lines only.
    notes = sys.stderr if as_json else sys.stdout
    if not as_json:
        print("angelos demo: a real MCP client starts `angelos serve` over stdio and uses it.")
    print(f"server log: {log_path} (the server's JSON log lines go there)", file=notes)
    # Open until the process ends, line by line: lines logged while it shuts down land there too.
    log = log_path.open("a", encoding="utf-8", buffering=1)
    _log_into(log)
    try:
        status = await _walk(env, log, as_json=as_json, sending=sending)
    except Exception as exc:  # any failure ends in one plain line, never a traceback
        _report_stop(exc, notes)
        status = 1
    if not as_json:
        print("\n== What next ==")
    print(f"server log: {log_path}", file=notes)
    if not as_json:
        print(NEXT)
    return status


async def _walk(env: Mapping[str, str], log: TextIO, *, as_json: bool, sending: bool) -> int:
    """The session itself: the mailbox, the send (if asked for) and the ledger commands."""
    target = StdioServerParameters(
        command=sys.executable, args=["-m", "service.cli", "serve", "--transport", "stdio"],
        env=dict(env),
    )  # fmt: skip
    async with Client(stdio_client(target, errlog=log), mode="auto") as client:
        walk = Walk(client, as_json=as_json)
        walk.heading("The mailbox")
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
        sent = await _send_once(walk) if sending else None
        # While the server still runs: an embedded store lives as long as its server process,
        # and a second process on the same data directory adopts it rather than starting one.
        return await _ledger(walk, env, log, sent)


def _capabilities(body: dict[str, Any]) -> str:
    gates = {
        "send": body.get("send_enabled"),
        "writes": body.get("mailbox_writes_enabled"),
        "delete": body.get("permanent_delete_enabled"),
    }
    return ", ".join(f"{name} {'on' if on else 'off'}" for name, on in gates.items())


async def _send_once(walk: Walk) -> str:
    """Prepare, confirm, ask for the status and confirm again; returns the prepared_id."""
    walk.heading("Sending once")
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
    return str(preview["prepared_id"])


async def _ledger(walk: Walk, env: Mapping[str, str], log: TextIO, sent: str | None) -> int:
    """Run `angelos ledger show` of the sent message (if any) and `angelos ledger verify`."""
    walk.heading("The ledger")
    commands: list[tuple[list[str], str]] = []
    if sent is None:
        if not walk.as_json:
            print(
                "    nothing in the ledger to show: this run sent nothing "
                "(ANGELOS_DEMO_SEND=1, which `make demo` sets, sends one message)"
            )
    else:
        commands.append((
            ["show", sent],
            "the hash-chained events of that one send, oldest first, and what they prove:",
        ))  # fmt: skip
    commands.append((
        ["verify"],
        "every send in the store re-checked: each hash chain, each state machine and the "
        "index; the last line is the verdict:",
    ))  # fmt: skip
    status = 0
    for number, (args, shows) in enumerate(commands):
        answer = await run_ledger(args, env, log, as_json=walk.as_json)
        status = status or (1 if answer.exit else 0)
        asked = f"angelos ledger {' '.join(args)}"
        walk.step += 1
        if walk.as_json:
            result = msgspec.to_builtins(as_result(answer))
            print(json.dumps({"step": walk.step, "asked": asked, "result": result}))
            continue
        if number:  # the commands' own output has blank lines inside; keep the steps apart
            print()
        print(f"{walk.step:>2}. $ {asked}\n    {shows}\n{as_text(answer, '      ')}")
    return status


def _log_into(log: TextIO) -> None:
    """Send this process's own log lines (and its unexpected errors) to the demo's log file."""
    # configure_logging writes to whatever sys.stderr is while it runs; the terminal belongs
    # to the walk-through.
    with contextlib.redirect_stderr(log):
        configure_logging()


def _report_stop(exc: Exception, notes: TextIO) -> None:
    """Say in one line why the demo stopped; the details go to the log file."""
    leaves = list(_leaves(exc))
    refused = [leaf for leaf in leaves if isinstance(leaf, MCPError)]
    if any(isinstance(leaf, Stopped) for leaf in leaves):
        print("the demo stopped at the step above", file=notes)
    elif refused:
        print(f"the server refused: {refused[0].error.message}", file=notes)
        print("(`make demo` runs this demo against a throwaway mailbox on loopback)", file=notes)
    else:
        structlog.get_logger("angelos").error("demo_stopped", exc_info=exc)
        names = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
        print(f"the demo stopped on an unexpected {names}; details in the server log", file=notes)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
