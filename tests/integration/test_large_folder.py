"""LARGE FOLDER: search, triage and conversation over a 20,000-message Dovecot folder.

The folder is built once per module with MULTIAPPEND over a raw TLS socket (LITERAL+, 2,000
messages per command), which takes a few seconds; the whole module should stay under a minute.
It proves that every call scans at most 1000 UIDs and stays small on the wire however big the
folder is, that cursors walk the whole folder, and that FETCH batching copes with 20,000 UIDs.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from providers.imap import codec, responses
from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from schemas.search import SearchQuery
from schemas.secret import Secret
from support.imap import quote_mailbox
from support.query_harness import Mcp, mcp, proxy
from support.services import Services

pytestmark = pytest.mark.services
__all__ = ["mcp", "proxy"]  # fixtures shared with test_search

SIZE = 20_000
NEEDLES = range(500, SIZE + 1, 1000)  # subject "needle": one per 1000-UID window
FAR_REPLY = 19_990  # references message 5, nineteen windows away


def bulk_message(n: int) -> tuple[bytes, bytes]:
    """Message number n (= its UID in a fresh folder) and its flag list."""
    subject = f"needle {n}" if n in NEEDLES else f"bulk {n}"
    headers = [
        "From: Bulk Sender <bulk@example.test>",
        "To: Alice <alice@example.test>",
        f"Subject: {subject}",
        "Date: Tue, 06 Jan 2026 10:00:00 +0000",
        f"Message-ID: <bulk-{n}@x.test>",
    ]
    if n == FAR_REPLY:
        headers.append("References: <bulk-5@x.test>")
    flags = b"" if n % 7 == 0 else b"\\Seen"
    if n % 500 == 0:
        flags += b" \\Flagged"
    return ("\r\n".join(headers) + f"\r\n\r\nbody {n}\r\n").encode(), flags.strip()


async def multiappend(
    services: Services, folder: str, messages: Sequence[tuple[bytes, bytes]], per_command: int
) -> None:
    """CREATE folder and APPEND all messages, `per_command` per MULTIAPPEND command."""
    reader, writer = await asyncio.open_connection(
        services.imap_host, services.imap_port, ssl=services.ssl_context()
    )
    tags = iter(range(1, 1_000_000))

    async def run(command: bytes) -> None:
        tag = b"b%d" % next(tags)
        writer.write(tag + b" " + command + b"\r\n")
        await writer.drain()
        while line := await reader.readline():
            if line.startswith(tag + b" "):
                assert line.startswith(tag + b" OK"), line[:200]
                return
        raise AssertionError("the IMAP connection closed")

    try:
        await reader.readline()  # greeting
        login, password = services.credentials()
        await run(b'LOGIN "%s" "%s"' % (login.encode(), password.encode()))
        mailbox = quote_mailbox(folder).encode()
        await run(b"CREATE " + mailbox)
        for start in range(0, len(messages), per_command):
            parts = [b"APPEND " + mailbox]
            for raw, flags in messages[start : start + per_command]:
                parts.append(b" (%s) {%d+}\r\n%s" % (flags, len(raw), raw))
            await run(b"".join(parts))
        await run(b"LOGOUT")
    finally:
        writer.close()


def settings(services: Services, timeout_s: float = 30.0) -> ImapSettings:
    return ImapSettings(
        host=services.imap_host,
        port=services.imap_port,
        username=services.username,
        password=Secret(services.password),
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
        timeout_s=timeout_s,
    )


async def delete_folder(services: Services, folder: str) -> None:
    # Dovecot deletes 20,000 messages file by file: beside other work that took over 30 s.
    mailbox = ImapMailbox(settings(services, timeout_s=300.0))
    try:
        async with mailbox.pool.session() as session:
            await session.command("DELETE", codec.mailbox_arg(folder))
    finally:
        await mailbox.aclose()


@pytest.fixture(scope="module")
def big(services: Services) -> Iterator[str]:
    """A folder of 20,000 messages with UIDs 1..20000 (built once, deleted afterwards)."""
    name = f"large-{uuid.uuid4().hex[:10]}"
    messages = [bulk_message(n) for n in range(1, SIZE + 1)]
    started = time.perf_counter()
    asyncio.run(multiappend(services, name, messages, per_command=2000))
    print(f"\nbuilt a {SIZE}-message folder in {time.perf_counter() - started:.1f} s")
    yield name
    asyncio.run(delete_folder(services, name))


@pytest.fixture
async def provider(services: Services) -> AsyncIterator[ImapMailbox]:
    mailbox = ImapMailbox(settings(services))
    yield mailbox
    await mailbox.aclose()


def uids(page: dict[str, Any]) -> list[int]:
    return [m["uid"] for m in page["messages"]]


class TestTwentyThousandMessages:
    async def test_the_first_page_is_the_newest_25_from_one_1000_uid_window(
        self, mcp: Mcp, big: str
    ) -> None:
        page = await mcp.search(big)
        assert list(range(SIZE, SIZE - 25, -1)) == uids(page)
        assert 1000 == page["scanned_uids"]
        assert "next_cursor" in page

    async def test_a_cursor_walks_every_window_and_finds_every_needle(
        self, mcp: Mcp, big: str
    ) -> None:
        pages = await mcp.all_pages(
            {"action": "search", "search": {"folder": big, "subject": "needle", "limit": 100}}
        )
        assert [[n] for n in reversed(NEEDLES)] == [uids(p) for p in pages]
        assert {1000} == {p["scanned_uids"] for p in pages}

    async def test_oldest_order_walks_the_folder_upwards(self, mcp: Mcp, big: str) -> None:
        pages = await mcp.all_pages(
            {
                "action": "search",
                "search": {"folder": big, "subject": "needle", "order": "oldest"},
            }
        )
        assert list(NEEDLES) == [u for p in pages for u in uids(p)]
        assert SIZE // 1000 == len(pages)

    async def test_an_exact_message_id_is_found_in_its_window_only(
        self, mcp: Mcp, big: str
    ) -> None:
        pages = await mcp.all_pages(
            {"action": "search", "search": {"folder": big, "message_id": "bulk-12345@x.test"}}
        )
        assert [12345] == [u for p in pages for u in uids(p)]

    async def test_triage_counts_the_page_of_the_top_window(self, mcp: Mcp, big: str) -> None:
        page = await mcp.ok({"action": "triage", "search": {"folder": big, "limit": 100}})
        wanted = [n for n in range(SIZE, SIZE - 1000, -1) if n % 7 == 0 or n % 500 == 0]
        assert wanted[:100] == uids(page)
        counts = page["page_counts"]
        assert (100, len([n for n in wanted[:100] if n % 500 == 0])) == (
            counts["messages"],
            counts["flagged"],
        )

    async def test_a_conversation_reaches_a_link_nineteen_windows_away(
        self, mcp: Mcp, big: str
    ) -> None:
        uid_validity = (await mcp.search(big, limit=1))["uid_validity"]
        anchor = {"folder": big, "uid_validity": uid_validity, "uid": FAR_REPLY}
        pages = await mcp.all_pages(
            {"action": "conversation", "reference": anchor, "search": {"limit": 100}}
        )
        assert [FAR_REPLY, 5] == [u for p in pages for u in uids(p)]
        assert SIZE // 1000 == len(pages)

    async def test_fetching_flags_of_all_20000_uids_goes_in_batches(
        self, provider: ImapMailbox, big: str
    ) -> None:
        async with provider.pool.session() as session:
            await session.examine(big)
            response = await session.uid_fetch(range(1, SIZE + 1), codec.raw("(UID FLAGS)"))
        groups = responses.group_responses(response.lines)
        assert SIZE == sum(1 for g in groups if b" FETCH " in g[0])


class TestMeasured:
    async def test_search_of_100_rows_on_a_1000_message_folder(
        self, services: Services, provider: ImapMailbox
    ) -> None:
        """Print the provider-level latency; no assertion on time (bench/ is for ratios)."""
        name = f"measure-{uuid.uuid4().hex[:10]}"
        await multiappend(services, name, [bulk_message(n) for n in range(1, 1001)], 1000)
        try:
            query = SearchQuery(operation="search", folder=name, limit=100)
            await provider.search(query)  # log in once; the pool keeps the session
            timings = []
            for _ in range(20):
                started = time.perf_counter()
                page = await provider.search(query)
                timings.append((time.perf_counter() - started) * 1000)
            assert (100, 1000) == (len(page.messages), page.scanned_uids)
            print(
                f"\nsearch 100 rows / 1000 messages: median {statistics.median(timings):.1f} ms,"
                f" min {min(timings):.1f} ms, max {max(timings):.1f} ms (20 runs)"
            )
        finally:
            await delete_folder(services, name)
