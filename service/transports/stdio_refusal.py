"""A stdio server that cannot start still tells its client why, in the client's own protocol.

MCP clients show their user "Connection closed" when a server exits at once, and keep its stderr
in a log few users open. So instead of exiting, a misconfigured server answers each request with
one JSON-RPC error naming the problems (variable names and rules, never values) and exits after
the legacy handshake's `initialize` has its answer, or when the client closes stdin. The
2026-07-28 era has no handshake: there every request, `server/discover` included, gets the same
error until the client goes away.
"""

from __future__ import annotations

import os
from typing import Final

import msgspec

from service.transports.jsonrpc_edge import TOO_LONG, Accepted, EdgeError, screen
from service.transports.stdio_pipes import TooLong, stdio_lines

# JSON-RPC's "Internal error": the server cannot serve anything; every client knows the code.
NOT_CONFIGURED: Final = -32603


class _Method(msgspec.Struct):
    method: str = ""


_METHOD = msgspec.json.Decoder(_Method)


def refusal(request_id: str | int, message: str, problems: tuple[str, ...]) -> EdgeError:
    """The error every request gets from a server that cannot start."""
    return EdgeError(NOT_CONFIGURED, message, request_id, {"problems": list(problems)})


async def refuse_stdio(message: str, problems: tuple[str, ...]) -> None:
    """Answer requests with the refusal until `initialize` is answered or stdin closes."""
    if os.isatty(0):  # a person at a terminal, not a client: the stderr line is enough
        return
    async with stdio_lines() as (lines, writer):
        async for line in lines:
            answer, initialize = _answer(line, message, problems)
            if answer is not None:
                await writer.write(answer.encode().decode() + "\n")
                await writer.flush()
            if initialize:
                return


def _answer(
    line: bytes | TooLong, message: str, problems: tuple[str, ...]
) -> tuple[EdgeError | None, bool]:
    """The reply to one line (None for notifications and blank lines) and whether it ends."""
    if isinstance(line, TooLong):
        return TOO_LONG, False
    raw = line[:-1] if line.endswith(b"\n") else line
    if not raw.strip():
        return None, False
    verdict = screen(raw)
    if isinstance(verdict, EdgeError):
        return verdict, False
    if not isinstance(verdict, Accepted) or verdict.id is None:
        return None, False  # a notification or a response: nothing to answer
    try:
        method = _METHOD.decode(raw).method
    except msgspec.DecodeError:  # screen() proved it a request object; be safe anyway
        method = ""
    return refusal(verdict.id, message, problems), method == "initialize"
