"""mail_query triage against the real Dovecot through an MCP client."""

from __future__ import annotations

from typing import Any

import aioimaplib
import pytest

from support.imap import Append
from support.query_harness import Mcp, folder, imap, live_flags, mail, mcp, proxy, seed

pytestmark = pytest.mark.services
__all__ = ["folder", "imap", "mcp", "proxy"]  # fixtures shared with test_search


async def four_kinds(imap: aioimaplib.IMAP4_SSL, folder: str) -> dict[str, int]:
    """Seed A unread, B read+flagged, C read, D unread+flagged; return their UIDs."""
    a, b, c, d = await seed(
        imap,
        folder,
        mail("A"),
        Append(mail("B"), flags=("\\Seen", "\\Flagged")),
        Append(mail("C"), flags=("\\Seen",)),
        Append(mail("D"), flags=("\\Flagged",)),
    )
    return {"A": a, "B": b, "C": c, "D": d}


async def triage(mcp: Mcp, folder: str, **search: Any) -> dict[str, Any]:
    return await mcp.ok({"action": "triage", "search": {"folder": folder, **search}})


def uids(page: dict[str, Any]) -> list[int]:
    return [m["uid"] for m in page["messages"]]


class TestSelection:
    async def test_unread_or_flagged_rows_come_newest_first_with_page_counts(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        kind = await four_kinds(imap, folder)
        page = await triage(mcp, folder)
        assert [kind["D"], kind["B"], kind["A"]] == uids(page)
        assert {"messages": 3, "unread": 2, "flagged": 2, "unread_and_flagged": 1} == page[
            "page_counts"
        ]
        assert isinstance(page["selection"], str) and page["selection"]
        assert (folder, "newest") == (page["folder"], page["order"])
        assert "uid_validity" in page and "scanned_uids" in page

    async def test_attention_false_is_invalid_without_mailbox_access(self, mcp: Mcp) -> None:
        await mcp.error_without_access(
            {"action": "triage", "search": {"attention": False}}, "invalid_arguments"
        )

    async def test_attention_true_is_the_same_as_omitting_it(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await four_kinds(imap, folder)
        assert await triage(mcp, folder) == await triage(mcp, folder, attention=True)

    async def test_unread_false_leaves_read_but_flagged_rows(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        kind = await four_kinds(imap, folder)
        assert [kind["B"]] == uids(await triage(mcp, folder, unread=False))

    async def test_flagged_false_leaves_unread_unflagged_rows(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        kind = await four_kinds(imap, folder)
        assert [kind["A"]] == uids(await triage(mcp, folder, flagged=False))

    async def test_other_filters_are_anded(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        kind = await four_kinds(imap, folder)
        assert [kind["D"]] == uids(await triage(mcp, folder, subject="D"))

    async def test_an_empty_folder_counts_zero_and_has_no_cursor(
        self, mcp: Mcp, folder: str
    ) -> None:
        page = await triage(mcp, folder)
        assert [] == page["messages"]
        assert {"messages": 0, "unread": 0, "flagged": 0, "unread_and_flagged": 0} == page[
            "page_counts"
        ]
        assert "next_cursor" not in page

    async def test_default_triage_reads_the_inbox(self, mcp: Mcp) -> None:
        page = await mcp.ok({"action": "triage"})
        assert "INBOX" == page["folder"]
        for row in page["messages"]:
            flags = {f.lower() for f in row["flags"]}
            assert "\\seen" not in flags or "\\flagged" in flags


class TestPagesAndDetail:
    async def test_full_detail_keeps_counts_and_hoisting_and_adds_references(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await four_kinds(imap, folder)
        before = await live_flags(imap, folder)
        page = await mcp.ok({"action": "triage", "search": {"folder": folder}, "detail": "full"})
        assert 3 == page["page_counts"]["messages"]
        assert folder == page["folder"]
        for row in page["messages"]:
            assert folder == row["reference"]["folder"]
            assert not {"text", "headers", "attachments", "bcc", "uid"} & set(row)
        assert before == await live_flags(imap, folder)

    async def test_counts_describe_each_page_only(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await four_kinds(imap, folder)
        first = await triage(mcp, folder, limit=2)
        second = await triage(mcp, folder, limit=2, cursor=first["next_cursor"])
        assert [2, 1] == [first["page_counts"]["messages"], second["page_counts"]["messages"]]
        assert {"messages": 1, "unread": 1, "flagged": 0, "unread_and_flagged": 0} == second[
            "page_counts"
        ]
        assert "next_cursor" not in second

    async def test_a_triage_cursor_binds_its_filters(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await four_kinds(imap, folder)
        cursor = (await triage(mcp, folder, limit=1))["next_cursor"]
        await mcp.error_without_access(
            {"action": "triage", "search": {"folder": folder, "cursor": cursor, "unread": True}},
            "invalid_arguments",
        )
