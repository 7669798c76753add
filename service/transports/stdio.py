"""MCP over stdin/stdout for one local client."""

from __future__ import annotations

import asyncio

from mcp.server.stdio import stdio_server

from service.app import build_app
from service.config import Config, LocalPrincipal
from service.mcp_server import build_server
from service.principal import local_principal
from service.transports.jsonrpc_edge import TOO_LONG, YIELD_ABOVE, Accepted, EdgeError, screen
from service.transports.stdio_pipes import LineSource, LineWriter, TooLong, stdio_lines


class ScreenedLines:
    """The client's lines as the SDK reads them, minus what screen() answers itself.

    A refused line is answered on the same writer the SDK uses (one whole line per write, so
    answers never interleave) and never reaches the SDK; blank lines carry no message and are
    skipped.
    """

    def __init__(self, lines: LineSource, writer: LineWriter) -> None:
        self._lines = lines
        self._writer = writer

    def __aiter__(self) -> ScreenedLines:
        return self

    async def __anext__(self) -> str:
        async for line in self._lines:
            verdict = TOO_LONG if isinstance(line, TooLong) else _screen_line(line)
            if verdict is None:
                continue
            if isinstance(verdict, EdgeError):
                await self._writer.write(verdict.encode().decode() + "\n")
                await self._writer.flush()
                continue
            assert isinstance(line, bytes)
            if len(line) > YIELD_ABOVE:
                await asyncio.sleep(0)
            return line.decode()  # screen() proved it valid UTF-8
        raise StopAsyncIteration


def _screen_line(line: bytes) -> Accepted | EdgeError | None:
    message = line[:-1] if line.endswith(b"\n") else line  # the limit is on the message
    return screen(message) if message.strip() else None


async def run_stdio(config: Config, local: LocalPrincipal) -> None:
    """Serve until the client closes stdin, then release pooled connections."""
    app = build_app(config)
    await app.start()
    principal = local_principal(local.owner, local.scopes)
    server = build_server(app, lambda ctx: principal)
    try:
        async with stdio_lines() as (lines, writer):
            screened = ScreenedLines(lines, writer)
            async with stdio_server(screened, writer) as (read_stream, write_stream):  # type: ignore[arg-type]
                await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await app.aclose()
