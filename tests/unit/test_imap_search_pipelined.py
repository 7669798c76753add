"""A search's UID SEARCH goes out behind its EXAMINE when the window can be planned beforehand."""

from __future__ import annotations

from providers.imap.search import search_page
from schemas.search import SearchQuery
from support.scripted_imap import EXAMINE, Reply, open_session

QUERY = SearchQuery(operation="search", folder="INBOX", limit=2)


ITEMS = b'FLAGS () INTERNALDATE "05-Jan-2026 10:00:00 +0000" RFC822.SIZE 9'


def summaries(tag: str, line: str) -> bytes:
    head = b"Subject: s\r\n\r\n"
    out = b""
    for n, uid in enumerate((2, 3), start=1):
        out += (
            b"* %d FETCH (UID %d %s BODY[HEADER.FIELDS (SUBJECT)] {%d}\r\n"
            % (n, uid, ITEMS, len(head))
            + head
            + b")\r\n"
        )
    return out + tag.encode() + b" OK done\r\n"


class Held:
    """Answer the EXAMINE only once the SEARCH behind it arrived (a wait would time out)."""

    def __init__(self) -> None:
        self.examine_tag = ""
        self.searches: list[str] = []

    def replies(self, pipelined: bool) -> dict[str, Reply]:
        def examine(tag: str, line: str) -> bytes | None:
            self.examine_tag = tag
            return None if pipelined else EXAMINE + tag.encode() + b" OK done\r\n"

        def search(tag: str, line: str) -> bytes:
            nonlocal pipelined
            self.searches.append(line)
            # Only the first SEARCH rides behind an EXAMINE still waiting for its answer.
            opened = EXAMINE + self.examine_tag.encode() + b" OK done\r\n" if pipelined else b""
            pipelined = False
            return opened + b"* SEARCH 1 2 3\r\n" + tag.encode() + b" OK done\r\n"

        return {"EXAMINE": examine, "UID SEARCH": search, "UID FETCH": summaries}


async def test_a_remembered_uidnext_sends_the_search_behind_the_examine() -> None:
    held = Held()
    session, peer = await open_session(held.replies(pipelined=True))
    session.last_uid_next["INBOX"] = 4  # what the scripted EXAMINE reports
    before = len(peer.commands)
    page = await search_page(session, QUERY, None)
    assert ["EXAMINE", "UID SEARCH", "UID FETCH"] == peer.commands[before:]
    assert [3, 2] == [m.reference.uid for m in page.messages]


async def test_a_guess_the_examine_contradicts_is_searched_again() -> None:
    held = Held()
    session, peer = await open_session(held.replies(pipelined=True))
    session.last_uid_next["INBOX"] = 2  # stale: the folder has grown to UIDNEXT 4
    before = len(peer.commands)
    page = await search_page(session, QUERY, None)
    assert ["EXAMINE", "UID SEARCH", "UID SEARCH", "UID FETCH"] == peer.commands[before:]
    assert "UID 1:1" in held.searches[0]
    assert "UID 1:3" in held.searches[1]
    assert [3, 2] == [m.reference.uid for m in page.messages]


async def test_a_folder_never_seen_is_examined_first() -> None:
    held = Held()
    session, peer = await open_session(held.replies(pipelined=False))
    before = len(peer.commands)
    await search_page(session, QUERY, None)
    assert ["EXAMINE", "UID SEARCH", "UID FETCH"] == peer.commands[before:]
    assert 4 == session.last_uid_next["INBOX"]
