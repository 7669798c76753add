"""The stdio lines: whole lines in order, over-long lines skipped, refused lines answered."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from service.transports.stdio import ScreenedLines
from service.transports.stdio_pipes import (
    MAX_LINE,
    TOO_LONG_LINE,
    Line,
    PipeLines,
    ThreadLines,
)


async def lines_of(data: bytes, limit: int) -> list[Line]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return [line async for line in PipeLines(reader)]


async def test_lines_arrive_whole_and_in_order() -> None:
    assert [b'{"a":1}\n', b'{"b":"\xc3\xa9"}\n', b"tail"] == await lines_of(
        b'{"a":1}\n{"b":"\xc3\xa9"}\ntail', 1024
    )


async def test_an_over_long_line_is_marked_once_and_serving_goes_on() -> None:
    data = b'{"first":1}\n' + b"x" * 5000 + b'\n{"next":2}\n'
    assert [b'{"first":1}\n', TOO_LONG_LINE, b'{"next":2}\n'] == await lines_of(data, 64)


async def test_an_over_long_last_line_without_newline_ends_cleanly() -> None:
    assert [b'{"first":1}\n', TOO_LONG_LINE] == await lines_of(b'{"first":1}\n' + b"y" * 5000, 64)


async def test_invalid_utf8_arrives_as_it_was_sent() -> None:
    assert [b"\xff\n"] == await lines_of(b"\xff\n", 64)


async def test_a_regular_file_is_read_line_by_line_in_threads(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a":1}\n\xff\nlast')
    fd = os.open(path, os.O_RDONLY)
    try:
        assert [b'{"a":1}\n', b"\xff\n", b"last"] == [line async for line in ThreadLines(fd)]
    finally:
        os.close(fd)


class Recorder:
    """A LineWriter that keeps what was written."""

    def __init__(self) -> None:
        self.text = ""

    async def write(self, text: str) -> None:
        self.text += text

    async def flush(self) -> None:
        pass


class Lines:
    """A LineSource over a fixed list."""

    def __init__(self, lines: list[Line]) -> None:
        self._lines = iter(lines)

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> Line:
        try:
            return next(self._lines)
        except StopIteration:
            raise StopAsyncIteration from None


async def screened(lines: list[Line]) -> tuple[list[str], list[dict[str, Any]]]:
    writer = Recorder()
    passed = [line async for line in ScreenedLines(Lines(lines), writer)]
    return passed, [json.loads(line) for line in writer.text.splitlines()]


async def test_valid_lines_reach_the_sdk_and_refused_ones_are_answered_in_order() -> None:
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    passed, answers = await screened([b"{oops\n", ping, b'[{"jsonrpc":"2.0"}]\n', TOO_LONG_LINE])
    assert [ping.decode()] == passed
    assert [(-32700, None), (-32600, None), (-32700, None)] == [
        (a["error"]["code"], a["id"]) for a in answers
    ]
    assert "Parse error: message longer than 8 MiB" == answers[2]["error"]["message"]


async def test_a_message_at_the_limit_passes_with_its_newline() -> None:
    head = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"'
    line = head + b"x" * (MAX_LINE - len(head) - 3) + b'"}}\n'
    passed, answers = await screened([line])
    assert ([MAX_LINE + 1], []) == ([len(p) for p in passed], answers)


async def test_blank_lines_are_skipped_without_an_answer() -> None:
    assert ([], []) == await screened([b"\n", b"  \r\n", b"\t"])
