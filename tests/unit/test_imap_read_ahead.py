"""read_many's read-ahead over a scripted IMAP peer: how many commands, and what each read gets."""

from __future__ import annotations

import pytest

from providers.imap.read_ahead import AHEAD_BYTES, ImapReader
from schemas.errors import NotFound, StaleReference
from schemas.mailbox import Reference
from support.scripted_imap import EXAMINE, Reply, open_session, tagged


def body(uid: int) -> bytes:
    return b"Subject: %d\r\n\r\nbody of %d\r\n" % (uid, uid)


def fetch_replies(sizes: dict[int, int], present: set[int]) -> Reply:
    """Answer a sizes FETCH from `sizes` and a body FETCH with each present UID's body."""

    def reply(tag: str, line: str) -> bytes:
        wanted = [int(u) for part in line.split(" ")[2].split(",") for u in _expand(part)]
        out = b""
        for n, uid in enumerate(u for u in wanted if u in present):
            if "BODY.PEEK" in line:
                raw = body(uid)
                head = b"* %d FETCH (UID %d FLAGS () RFC822.SIZE %d BODY[]<0> {%d}\r\n"
                out += head % (n + 1, uid, len(raw), len(raw)) + raw + b")\r\n"
            else:
                out += b"* %d FETCH (UID %d RFC822.SIZE %d)\r\n" % (n + 1, uid, sizes[uid])
        return out + tag.encode() + b" OK done\r\n"

    return reply


def _expand(part: str) -> list[int]:
    low, _, high = part.partition(":")
    return list(range(int(low), int(high or low) + 1))


def refs(*uids: int, folder: str = "INBOX", validity: int = 7) -> list[Reference]:
    return [Reference(folder=folder, uid_validity=validity, uid=u) for u in uids]


async def test_five_reads_of_one_folder_take_two_round_trips() -> None:
    sizes = {1: 40, 2: 40, 3: 40}
    session, peer = await open_session({"UID FETCH": fetch_replies(sizes, {1, 2, 3})})
    planned = refs(1, 2, 3)
    reader = ImapReader(session, planned)
    before = len(peer.commands)
    read = [await reader.read_raw(ref) for ref in planned]
    assert ["EXAMINE", "UID FETCH", "UID FETCH"] == peer.commands[before:]
    assert [body(1), body(2), body(3)] == [r.raw for r in read]
    assert [1, 2, 3] == [r.reference.uid for r in read]


async def test_an_expunged_uid_is_not_found_and_the_others_are_read() -> None:
    sizes = {1: 40, 3: 40, 4: 40}
    session, peer = await open_session({"UID FETCH": fetch_replies(sizes, {1, 3, 4})})
    planned = refs(1, 2, 3, 4)
    reader = ImapReader(session, planned)
    assert body(1) == (await reader.read_raw(planned[0])).raw
    with pytest.raises(NotFound):  # asked again on its own: still absent
        await reader.read_raw(planned[1])
    assert body(3) == (await reader.read_raw(planned[2])).raw
    assert body(4) == (await reader.read_raw(planned[3])).raw
    assert 3 == peer.commands.count("UID FETCH")  # sizes, bodies, the lone read of UID 2


async def test_messages_past_the_byte_cap_are_read_on_their_own() -> None:
    big = AHEAD_BYTES // 2 + 1
    sizes = {1: big, 2: big, 3: 40}  # 1 fits, 2 would pass the cap: only 1 goes ahead
    session, peer = await open_session({"UID FETCH": fetch_replies(sizes, {1, 2, 3})})
    planned = refs(1, 2, 3)
    reader = ImapReader(session, planned)
    before = len(peer.commands)
    read = [await reader.read_raw(ref) for ref in planned]
    assert [body(1), body(2), body(3)] == [r.raw for r in read]
    # One message in reach saves nothing: after the sizes, every read goes on its own.
    assert ["EXAMINE"] + ["UID FETCH"] * 4 == peer.commands[before:]
    bodies = [w for w in peer.written if b"BODY.PEEK" in w]
    assert [b"1", b"2", b"3"] == [w.split(b" ")[3] for w in bodies]


async def test_a_stale_reference_is_refused_before_any_body_is_read() -> None:
    sizes = {1: 40, 2: 40, 3: 40}
    session, peer = await open_session({"UID FETCH": fetch_replies(sizes, {1, 2, 3})})
    planned = refs(1, 2, 3, validity=8)  # the folder's UIDVALIDITY is 7
    reader = ImapReader(session, planned)
    with pytest.raises(StaleReference):
        await reader.read_raw(planned[0])
    assert not any(b"BODY.PEEK" in w for w in peer.written)


async def test_two_references_read_one_by_one() -> None:
    session, peer = await open_session(
        {"EXAMINE": tagged(b"OK", EXAMINE), "UID FETCH": fetch_replies({1: 40, 2: 40}, {1, 2})}
    )
    planned = refs(1, 2)
    reader = ImapReader(session, planned)
    read = [await reader.read_raw(ref) for ref in planned]
    assert [body(1), body(2)] == [r.raw for r in read]
    assert not any(b"RFC822.SIZE)" in w for w in peer.written)  # no sizes asked first
