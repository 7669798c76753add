"""FetchReply answers "is this message's FETCH answer complete?" exactly as aioimaplib does."""

from __future__ import annotations

import asyncio

from aioimaplib import aioimaplib
from hypothesis import given
from hypothesis import strategies as st

from providers.imap.wire import FetchReply

LINE = st.one_of(
    st.sampled_from(
        [b"1 FETCH (UID 1", b"12 FETCH (FLAGS (\\Seen))", b")", b"(", b" FLAGS ())", b"x"]
    ),
    st.binary(max_size=12),
)
# A literal's data reaches the command as a bytearray; its parentheses never count.
ENTRY = st.one_of(LINE, LINE.map(bytearray))


@given(st.lists(ENTRY, max_size=40))
def test_the_check_agrees_with_aioimaplib_after_every_line(entries: list[bytes]) -> None:
    loop = asyncio.new_event_loop()
    try:
        ours = FetchReply("A1", "1", "(UID)", prefix="UID", loop=loop)
        theirs = aioimaplib.FetchCommand("A2", "1", "(UID)", prefix="UID", loop=loop)
        for entry in entries:
            ours.append_to_resp(entry)
            theirs.append_to_resp(entry)
            assert theirs.wait_data() == ours.wait_data()
    finally:
        loop.close()


def test_an_open_parenthesis_waits_until_its_closing_line() -> None:
    loop = asyncio.new_event_loop()
    try:
        command = FetchReply("A1", "1", "(UID)", prefix="UID", loop=loop)
        command.append_to_resp(b"1 FETCH (UID 1 BODY[] {3}")
        assert command.wait_data()
        command.append_to_resp(bytearray(b"((("))
        assert command.wait_data()
        command.append_to_resp(b")")
        assert not command.wait_data()
        command.append_to_resp(b"2 FETCH (UID 2 FLAGS (\\Seen)")
        assert command.wait_data()
    finally:
        loop.close()
