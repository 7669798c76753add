"""The thread-free stdio lines: whole lines in order, over-long lines skipped, EOF ends."""

from __future__ import annotations

import asyncio

from service.transports.stdio_pipes import PipeLines


async def lines_of(data: bytes, limit: int) -> list[str]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return [line async for line in PipeLines(reader)]


async def test_lines_arrive_whole_and_in_order() -> None:
    assert ['{"a":1}\n', '{"b":"é"}\n', "tail"] == await lines_of(
        b'{"a":1}\n{"b":"\xc3\xa9"}\ntail', 1024
    )


async def test_an_over_long_line_becomes_one_unreadable_line_and_serving_goes_on() -> None:
    data = b'{"first":1}\n' + b"x" * 5000 + b'\n{"next":2}\n'
    assert ['{"first":1}\n', "\n", '{"next":2}\n'] == await lines_of(data, 64)


async def test_an_over_long_last_line_without_newline_ends_cleanly() -> None:
    assert ['{"first":1}\n', "\n"] == await lines_of(b'{"first":1}\n' + b"y" * 5000, 64)


async def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert ["\ufffd\n"] == await lines_of(b"\xff\n", 64)
