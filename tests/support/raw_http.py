"""Hand-written HTTP/1.1 requests over a socket, for headers no client library lets through."""

from __future__ import annotations

import asyncio
from typing import NamedTuple

JSON_HEADERS = (("Content-Type", "application/json"), ("Accept", "application/json"))


class RawResponse(NamedTuple):
    """Status, headers (names lower-cased, the last value of each) and the decoded body."""

    status: int
    headers: dict[str, str]
    body: bytes


def request_bytes(
    method: str,
    path: str,
    headers: tuple[tuple[str, str], ...] | list[tuple[str, str]],
    body: bytes = b"",
) -> bytes:
    """One request that closes the connection afterwards; header values are sent verbatim."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


async def exchange(address: str, port: int, raw: bytes) -> RawResponse:
    """Send raw bytes, read until the server closes (within 30 s), and parse the response."""
    async with asyncio.timeout(30):
        reader, writer = await asyncio.open_connection(address.strip("[]"), port)
        try:
            writer.write(raw)
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return RawResponse(int(status_line.split()[1]), headers, body)


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out
