"""mail_query conversation against the real Dovecot through an MCP client."""

from __future__ import annotations

from typing import Any

import aioimaplib
import pytest

from support.imap import append_messages, create_folder, quote_mailbox
from support.query_harness import Mcp, folder, imap, mail, mcp, proxy, seed

pytestmark = pytest.mark.services
__all__ = ["folder", "imap", "mcp", "proxy"]  # fixtures shared with test_search


class Thread:
    """The five-message thread of check 37, seeded into a fresh folder (and a second one)."""

    def __init__(self, folder: str, uid_validity: int, uids: list[int]) -> None:
        self.folder = folder
        self.uid_validity = uid_validity
        self.m1, self.m2, self.m3, self.m4 = uids

    def ref(self, uid: int) -> dict[str, Any]:
        return {"folder": self.folder, "uid_validity": self.uid_validity, "uid": uid}


@pytest.fixture
async def thread(imap: aioimaplib.IMAP4_SSL, folder: str) -> Any:
    appended = await append_messages(
        imap,
        folder,
        [
            mail("Plans", message_id="<root@x.test>"),
            mail("Re: Plans", message_id="<m2@x.test>", headers=["In-Reply-To: <root@x.test>"]),
            mail(
                "Re: Plans",
                message_id="<m3@x.test>",
                headers=["References: <root@x.test>\r\n <m2@x.test>"],
            ),
            mail("Plans", message_id="<m4@x.test>"),
        ],
    )
    elsewhere = await create_folder(imap, "conversation-other")
    await append_messages(
        imap,
        elsewhere,
        [mail("Re: Plans", message_id="<m5@x.test>", headers=["In-Reply-To: <root@x.test>"])],
    )
    yield Thread(folder, appended.uidvalidity, appended.uids)
    await imap.delete(quote_mailbox(elsewhere))


async def conversation(mcp: Mcp, reference: dict[str, Any], **search: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"action": "conversation", "reference": reference}
    if search:
        arguments["search"] = search
    return await mcp.ok(arguments)


def uids(page: dict[str, Any]) -> list[int]:
    return [m["uid"] for m in page["messages"]]


class TestLinks:
    async def test_the_anchor_s_id_set_links_exactly_the_same_folder_thread(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        page = await conversation(mcp, thread.ref(thread.m2))
        assert [thread.m3, thread.m2, thread.m1] == uids(page)
        assert thread.ref(thread.m2) == page["anchor"]
        assert isinstance(page["coverage"], str) and page["coverage"]
        assert (thread.folder, thread.uid_validity) == (page["folder"], page["uid_validity"])

    async def test_an_anchor_without_links_finds_only_itself(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        assert [thread.m4] == uids(await conversation(mcp, thread.ref(thread.m4)))

    async def test_oldest_order_ascends(self, mcp: Mcp, thread: Thread) -> None:
        page = await conversation(mcp, thread.ref(thread.m2), order="oldest")
        assert [thread.m1, thread.m2, thread.m3] == uids(page)

    async def test_full_detail_gives_full_summaries(self, mcp: Mcp, thread: Thread) -> None:
        page = await mcp.ok(
            {"action": "conversation", "reference": thread.ref(thread.m1), "detail": "full"}
        )
        assert [thread.ref(u) for u in (thread.m3, thread.m2, thread.m1)] == [
            m["reference"] for m in page["messages"]
        ]
        assert thread.folder == page["folder"]

    async def test_case_differences_and_malformed_candidates_do_not_link(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        root, _upper, _junk, good = await seed(
            imap,
            folder,
            mail("root", message_id="<root@x.test>"),
            mail("upper", message_id="<a@x.test>", headers=["In-Reply-To: <ROOT@x.test>"]),
            mail("junk", message_id="<b@x.test>", headers=['References: <root@x.test> "junk"']),
            mail("good", message_id="<c@x.test>", headers=["References: (c) <root@x.test>"]),
        )
        ref = {"folder": folder, "uid_validity": 0, "uid": root}
        ref["uid_validity"] = (await mcp.search(folder))["uid_validity"]
        assert [good, root] == uids(await conversation(mcp, ref))

    async def test_the_corpus_thread_stays_in_its_folder_without_subject_matching(
        self, mcp: Mcp
    ) -> None:
        inbox = await mcp.search("INBOX", subject="Q3 budget review")
        replies = [m["uid"] for m in inbox["messages"]]
        anchor = {"folder": "INBOX", "uid_validity": inbox["uid_validity"], "uid": min(replies)}
        page = await conversation(mcp, anchor)
        linked = uids(page)
        assert min(replies) in linked
        assert set(linked) < set(replies)  # the same-subject message without links stays out
        assert all(m["subject"].lower().endswith("q3 budget review") for m in page["messages"])


class TestRejections:
    async def test_an_anchor_without_any_id_header_is_invalid(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        (bare,) = await seed(imap, folder, b"Subject: no ids\r\n\r\nbody\r\n")
        uid_validity = (await mcp.search(folder))["uid_validity"]
        await mcp.error(
            {
                "action": "conversation",
                "reference": {"folder": folder, "uid_validity": uid_validity, "uid": bare},
            },
            "invalid_arguments",
        )

    @pytest.mark.parametrize(
        "search",
        [{"query": ""}, {"unread": False}, {"attention": True}, {"folder": "Archive"}],
    )
    async def test_search_keys_beyond_folder_order_cursor_limit_are_invalid_without_access(
        self, mcp: Mcp, search: dict[str, Any]
    ) -> None:
        reference = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
        await mcp.error_without_access(
            {"action": "conversation", "reference": reference, "search": search},
            "invalid_arguments",
        )

    async def test_empty_order_and_the_anchor_s_own_folder_are_accepted(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        page = await conversation(mcp, thread.ref(thread.m4), order="", folder=thread.folder)
        assert [thread.m4] == uids(page)

    async def test_an_anchor_at_or_past_uidnext_is_not_found(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        await mcp.error(
            {"action": "conversation", "reference": thread.ref(thread.m4 + 1)}, "not_found"
        )

    async def test_an_expunged_anchor_is_not_found(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, thread: Thread
    ) -> None:
        await imap.select(quote_mailbox(thread.folder))
        await imap.uid("store", str(thread.m3), "+FLAGS.SILENT", "(\\Deleted)")
        await imap.uid("expunge", str(thread.m3))
        await imap.close()
        await mcp.error({"action": "conversation", "reference": thread.ref(thread.m3)}, "not_found")

    async def test_a_wrong_uidvalidity_is_a_stale_reference(self, mcp: Mcp, thread: Thread) -> None:
        reference = {**thread.ref(thread.m1), "uid_validity": thread.uid_validity - 1}
        await mcp.error({"action": "conversation", "reference": reference}, "stale_reference")

    async def test_a_graph_anchor_is_unsupported_without_mailbox_access(self, mcp: Mcp) -> None:
        reference = {"folder": "f", "provider": "microsoft_graph", "account": "a", "id": "i"}
        await mcp.error_without_access(
            {"action": "conversation", "reference": reference}, "unsupported_operation"
        )


class TestCursors:
    async def test_a_search_cursor_is_not_a_conversation_cursor(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        cursor = (await mcp.search(thread.folder, limit=1))["next_cursor"]
        await mcp.error_without_access(
            {
                "action": "conversation",
                "reference": thread.ref(thread.m2),
                "search": {"cursor": cursor},
            },
            "invalid_arguments",
        )

    async def test_a_conversation_cursor_is_bound_to_its_anchor_and_order(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        cursor = (await conversation(mcp, thread.ref(thread.m2), limit=1))["next_cursor"]
        for reference, search in (
            (thread.ref(thread.m3), {"cursor": cursor, "limit": 1}),
            (thread.ref(thread.m2), {"cursor": cursor, "order": "oldest"}),
        ):
            await mcp.error(
                {"action": "conversation", "reference": reference, "search": search},
                "invalid_arguments",
            )

    async def test_a_conversation_cursor_is_not_a_search_cursor(
        self, mcp: Mcp, thread: Thread
    ) -> None:
        cursor = (await conversation(mcp, thread.ref(thread.m2), limit=1))["next_cursor"]
        await mcp.error_without_access(
            {"action": "search", "search": {"folder": thread.folder, "cursor": cursor}},
            "invalid_arguments",
        )

    async def test_thirty_linked_messages_page_25_then_5_without_duplicates(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        replies = [
            mail(f"Re: {i}", message_id=f"<r{i}@x.test>", headers=["In-Reply-To: <t@x.test>"])
            for i in range(29)
        ]
        appended = await append_messages(
            imap, folder, [mail("top", message_id="<t@x.test>"), *replies]
        )
        anchor = {"folder": folder, "uid_validity": appended.uidvalidity, "uid": appended.uids[0]}
        first = await conversation(mcp, anchor, limit=25)
        second = await conversation(mcp, anchor, limit=25, cursor=first["next_cursor"])
        assert [25, 5] == [len(first["messages"]), len(second["messages"])]
        assert "next_cursor" not in second
        assert sorted(appended.uids, reverse=True) == uids(first) + uids(second)
