"""The HTTP listener on the wire: head and idle deadlines, quiet short 400s for malformed
requests, no redirect for /mcp/, and one line when the port is taken.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.transports.http_listener import HEAD_TIMEOUT_S, IDLE_TIMEOUT_S, MALFORMED_BODY
from support.angelos_process import angelos_command, clean_env, free_port, http_server
from support.raw_http import JSON_HEADERS, exchange, request_bytes

MARGIN_S = 10.0  # a busy two-core machine may be late by seconds, never by this much
MARKER = "SECRET-MARKER-4711"
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


async def closed_by_server(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Read until the server closes the connection; False if it is still open after within_s."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass  # a reset is a close too
    return True


async def silent(port: int) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await closed_by_server(reader, HEAD_TIMEOUT_S + MARGIN_S)
    finally:
        writer.close()


async def trickle_head(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int, within_s: float
) -> bool:
    """Send a request head one line a second, never finishing it; True when the server closes."""

    async def lines() -> None:
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
        for n in range(int(within_s) + 5):
            await asyncio.sleep(1)
            writer.write(f"X-Slow-{n}: {n}\r\n".encode())
            await writer.drain()

    sender = asyncio.create_task(lines())
    try:
        return await closed_by_server(reader, within_s)
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)  # a write to a closed socket fails
        writer.close()


async def slow_first_head(port: int) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return await trickle_head(reader, writer, port, HEAD_TIMEOUT_S + MARGIN_S)


async def one_request(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A kept-alive connection after one complete answer to GET /healthz."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    return reader, writer


async def idle_after_a_request(port: int) -> bool:
    reader, writer = await one_request(port)
    try:
        return await closed_by_server(reader, IDLE_TIMEOUT_S + MARGIN_S)
    finally:
        writer.close()


async def slow_second_head(port: int) -> bool:
    reader, writer = await one_request(port)
    return await trickle_head(reader, writer, port, IDLE_TIMEOUT_S + MARGIN_S)


async def test_silent_slow_header_and_idle_connections_are_closed_by_the_server() -> None:
    with http_server({}) as base:
        port = port_of(base)
        async with asyncio.timeout(IDLE_TIMEOUT_S + MARGIN_S + 30):
            outcomes = await asyncio.gather(
                silent(port),
                slow_first_head(port),
                idle_after_a_request(port),
                slow_second_head(port),
            )
        # The server still serves after closing them.
        answer = await exchange(
            "127.0.0.1", port, request_bytes("GET", "/healthz", [("Host", f"127.0.0.1:{port}")])
        )
    cases = ["silent", "slow first head", "idle after a request", "slow second head"]
    assert {case: True for case in cases} == dict(zip(cases, outcomes, strict=True))
    assert 200 == answer.status


@pytest.fixture(scope="module")
def owner_server(
    services: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    log_file = tmp_path_factory.mktemp("listener") / "stderr.log"
    with (
        log_file.open("wb") as stderr,
        http_server(
            services.product_env, "--insecure-local-owner", "listener", stderr=stderr
        ) as base,
    ):
        yield base, log_file


def own(base: str) -> tuple[str, str]:
    return ("Host", base.removeprefix("http://"))


async def raw(base: str, data: bytes) -> Any:
    return await exchange("127.0.0.1", port_of(base), data)


MALFORMED = {
    "bad header name": lambda host: (
        f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nBad {MARKER}\x01: x\r\n\r\n".encode("latin-1")
    ),
    "bad method": lambda host: f"G{MARKER}\x01 /mcp HTTP/1.1\r\nHost: {host}\r\n\r\n".encode(
        "latin-1"
    ),
    "both lengths": lambda host: (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Length: 3\r\n"
        f"Transfer-Encoding: chunked, {MARKER}\r\n\r\nabc"
    ).encode("latin-1"),
    "bad chunk size": lambda host: (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n"
        f"{MARKER}\r\n0\r\n\r\n"
    ).encode("latin-1"),
    "body that is no gzip": lambda host: request_bytes(
        "POST",
        "/mcp",
        [("Host", host), *JSON_HEADERS, ("Content-Encoding", "gzip")],
        MARKER.encode(),
    ),
}


async def test_malformed_requests_get_a_short_400_without_echo_and_one_info_line(
    owner_server: tuple[str, Path],
) -> None:
    base, log_file = owner_server
    host = base.removeprefix("http://")
    answers = {case: await raw(base, make(host)) for case, make in MALFORMED.items()}
    assert {case: (400, MALFORMED_BODY.encode()) for case in MALFORMED} == {
        case: (a.status, a.body) for case, a in answers.items()
    }
    assert all("nosniff" == a.headers["x-content-type-options"] for a in answers.values())
    # A well-formed request on a new connection is served as before.
    ping = await raw(base, request_bytes("POST", "/mcp", [own(base), *JSON_HEADERS], PING))
    assert 200 == ping.status
    await asyncio.sleep(0.5)  # let the server write its log line
    text = log_file.read_text()
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    refused = [e for e in events if e.get("event") == "malformed HTTP request refused"]
    # At most one line a minute: the first is logged, the other four are counted for the next.
    assert [("info", 0)] == [(e["level"], e["not_logged_since"]) for e in refused]
    assert [] == [e for e in events if e["level"] in ("error", "critical") or "stack" in e]
    assert MARKER not in text


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_mcp_with_a_trailing_slash_is_404_and_never_a_redirect(
    owner_server: tuple[str, Path], method: str
) -> None:
    base, _ = owner_server
    headers = [own(base), *JSON_HEADERS, ("X-Forwarded-Proto", "https")]
    answer = await raw(base, request_bytes(method, "/mcp/", headers, PING))
    assert (404, None) == (answer.status, answer.headers.get("location"))


def test_a_port_in_use_is_one_error_line_and_exit_status_1(services: Any) -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        started = time.monotonic()
        done = subprocess.run(
            angelos_command(
                "serve", "--transport", "http", "--port", str(port), "--insecure-local-owner", "o"
            ),
            env=clean_env(services.product_env),
            capture_output=True,
            timeout=60,
            check=False,
        )
    lines = done.stderr.decode().splitlines()
    errors = [json.loads(line) for line in lines if '"level": "error"' in line]
    assert 1 == done.returncode, (lines, time.monotonic() - started)
    assert [
        f"angelos cannot listen on 127.0.0.1 port {port}:"
        " the address is already in use (another process holds this port)"
    ] == [e["event"] for e in errors]
    assert not any("stack" in line or "Traceback" in line for line in lines)
