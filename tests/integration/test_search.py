"""mail_query search against the real Dovecot through an MCP client.

Each test seeds its own fresh folder over raw IMAP (tests/support/imap.py) and searches it
through the whole call pipeline; the fixture corpus folders are only read. Every IMAP byte the
server sends goes through a counting proxy, so "no mailbox access" is observable.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import aioimaplib
import pytest

from providers.imap import codec
from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from schemas.secret import Secret
from support.imap import (
    Append,
    append_messages,
    ok,
    quote_mailbox,
)
from support.query_harness import Mcp, folder, imap, live_flags, mail, mcp, proxy, seed
from support.services import Services

pytestmark = pytest.mark.services
__all__ = ["folder", "imap", "mcp", "proxy"]  # fixtures from support.query_harness


class TestDefaultsAndOrder:
    async def test_default_search_is_inbox_newest_25_without_references(self, mcp: Mcp) -> None:
        body = await mcp.ok({"action": "search"})
        uids = [m["uid"] for m in body["messages"]]
        assert ("INBOX", "newest", 25) == (body["folder"], body["order"], len(uids))
        assert sorted(uids, reverse=True) == uids
        assert all("reference" not in m for m in body["messages"])

    async def test_five_messages_come_newest_first_in_one_window(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        appended = await append_messages(imap, folder, [mail(f"m{i}") for i in range(5)])
        body = await mcp.search(folder)
        assert appended.uidvalidity == body["uid_validity"]
        assert appended.uids[::-1] == [m["uid"] for m in body["messages"]]
        assert "next_cursor" not in body
        assert appended.uids[-1] == body["scanned_uids"]
        assert all("reference" not in m for m in body["messages"])

    async def test_a_repeated_search_sees_what_arrived_since_and_nothing_else(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        # The second search plans its window from the UIDNEXT the pooled session saw first;
        # the folder has grown since, so that guess must be thrown away and asked again.
        first = await seed(imap, folder, *[mail(f"m{i}") for i in range(3)])
        assert first[::-1] == [m["uid"] for m in (await mcp.search(folder))["messages"]]
        later = await seed(imap, folder, *[mail(f"n{i}") for i in range(2)])
        again = await mcp.search(folder)
        assert (first + later)[::-1] == [m["uid"] for m in again["messages"]]
        assert later[-1] == again["scanned_uids"]
        unchanged = await mcp.search(folder)  # the guess holds now: the same page
        assert again["messages"] == unchanged["messages"]

    async def test_limit_2_pages_through_five_without_duplicates(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        u = await seed(imap, folder, *[mail(f"m{i}") for i in range(5)])
        pages = await mcp.all_pages({"action": "search", "search": {"folder": folder, "limit": 2}})
        assert [[u[4], u[3]], [u[2], u[1]], [u[0]]] == [
            [m["uid"] for m in p["messages"]] for p in pages
        ]

    async def test_oldest_pages_ascend(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        u = await seed(imap, folder, *[mail(f"m{i}") for i in range(5)])
        pages = await mcp.all_pages(
            {"action": "search", "search": {"folder": folder, "order": "oldest", "limit": 2}}
        )
        assert [[u[0], u[1]], [u[2], u[3]], [u[4]]] == [
            [m["uid"] for m in p["messages"]] for p in pages
        ]
        assert {"oldest"} == {p["order"] for p in pages}

    async def test_limit_101_is_invalid_without_mailbox_access(self, mcp: Mcp) -> None:
        await mcp.error_without_access(
            {"action": "search", "search": {"limit": 101}}, "invalid_arguments"
        )

    async def test_limit_0_behaves_like_25(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await seed(imap, folder, *[mail(f"m{i}") for i in range(30)])
        assert 25 == len(await mcp.uids(folder, limit=0))
        assert await mcp.uids(folder, limit=0) == await mcp.uids(folder)

    async def test_a_missing_folder_is_service_unavailable(self, mcp: Mcp) -> None:
        await mcp.error(
            {"action": "search", "search": {"folder": "NoSuchFolder"}}, "service_unavailable"
        )

    async def test_an_empty_folder_is_an_empty_page_without_cursor(
        self, mcp: Mcp, folder: str
    ) -> None:
        body = await mcp.search(folder)
        assert ([], 0) == (body["messages"], body["scanned_uids"])
        assert "next_cursor" not in body


class TestFilters:
    async def test_since_is_inclusive_and_before_exclusive_on_arrival_date(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        days = [datetime(2026, 1, d, 12, tzinfo=UTC) for d in (1, 2, 3)]
        u = await seed(imap, folder, *[Append(mail(f"d{d.day}"), internal_date=d) for d in days])
        assert [u[1]] == await mcp.uids(folder, since="2026-01-02", before="2026-01-03")
        assert [u[2], u[1]] == await mcp.uids(folder, since="2026-01-02")

    @pytest.mark.parametrize(
        "search",
        [
            {"since": "2026-01-03", "before": "2026-01-03"},
            {"since": "2026/01/03"},
            {"query": "a\r\nb"},
            {"message_id": '"quoted"@x.test'},
            {"folder": "bad\x00name"},
            {"cursor": "x" * 513},
        ],
    )
    async def test_bad_filters_are_invalid_without_mailbox_access(
        self, mcp: Mcp, search: dict[str, Any]
    ) -> None:
        await mcp.error_without_access({"action": "search", "search": search}, "invalid_arguments")

    async def test_unread_and_flagged_select_by_flags_and_null_is_omitted(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        unread, read, flagged = await seed(
            imap,
            folder,
            mail("unread"),
            Append(mail("read"), flags=("\\Seen",)),
            Append(mail("read flagged"), flags=("\\Seen", "\\Flagged")),
        )
        assert [unread] == await mcp.uids(folder, unread=True)
        assert [flagged, read] == await mcp.uids(folder, unread=False)
        assert [flagged] == await mcp.uids(folder, flagged=True)
        assert [read, unread] == await mcp.uids(folder, flagged=False)
        assert await mcp.uids(folder) == await mcp.uids(folder, unread=None, flagged=None)

    async def test_attention_is_unread_or_flagged_anded_with_unread(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        unread, _read, flagged = await seed(
            imap,
            folder,
            mail("unread"),
            Append(mail("read"), flags=("\\Seen",)),
            Append(mail("read flagged"), flags=("\\Seen", "\\Flagged")),
        )
        assert [flagged, unread] == await mcp.uids(folder, attention=True)
        assert [flagged] == await mcp.uids(folder, attention=True, unread=False)

    async def test_participant_matches_cc_but_never_bcc(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        cc, _bcc = await seed(
            imap,
            folder,
            mail("cc", headers=["Cc: Pat <pat@example.test>"]),
            mail("bcc", headers=["Bcc: pat@example.test"]),
        )
        assert [cc] == await mcp.uids(folder, participant="pat@example")

    async def test_participant_covers_from_reply_to_to_and_cc_in_any_case(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        base = ["Date: Mon, 05 Jan 2026 09:00:00 +0000", "Subject: p"]
        raw = [
            "\r\n".join([*base, f"{field}: Quinn <quinn@example.test>"]) + "\r\n\r\nx\r\n"
            for field in ("From", "Reply-To", "To", "Cc")
        ]
        u = await seed(imap, folder, *[r.encode() for r in raw], mail("none"))
        assert u[3::-1] == await mcp.uids(folder, participant="QUINN@Example")

    async def test_text_from_to_and_subject_filters(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        invoice, _other = await seed(
            imap,
            folder,
            mail("Invoice 2026-031", body="amount due", headers=["Cc: x@example.test"]),
            mail("Lunch", body="see you"),
        )
        assert [invoice] == await mcp.uids(folder, query="amount due")
        assert [invoice] == await mcp.uids(folder, subject="invoice")
        assert [invoice] == await mcp.uids(folder, **{"from": "sender@"}, subject="Invoice")
        assert [] == await mcp.uids(folder, to="nobody@", subject="Invoice")

    async def test_non_ascii_subject_and_participant_match_rfc2047_headers(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        encoded, _plain = await seed(
            imap,
            folder,
            mail(
                "Status: =?utf-8?Q?Gr=C3=B6=C3=9Fen=C3=A4nderung?=",
                headers=["Cc: =?utf-8?B?Wm/DqyDDmHJzdGVk?= <zoe@example.org>"],
                body="Ärger im Büro",
            ),
            mail("Groessen"),
        )
        assert [encoded] == await mcp.uids(folder, subject="Größenänderung")
        assert [encoded] == await mcp.uids(folder, participant="Zoë")
        assert [encoded] == await mcp.uids(folder, query="Büro")

    async def test_non_ascii_search_on_the_corpus_inbox(self, mcp: Mcp) -> None:
        body = await mcp.search("INBOX", subject="réunion d'équipe")
        assert ["Réunion d'équipe — ordre du jour ✅"] == [m["subject"] for m in body["messages"]]
        body = await mcp.search("INBOX", participant="田中")
        assert [[{"name": "田中 ユキ", "address": "yuki@example.org"}]] == [
            m["from"] for m in body["messages"]
        ]

    async def test_a_unicode_folder_name_is_searched_exactly(self, mcp: Mcp) -> None:
        body = await mcp.search("Projets/Café Été 2026")
        assert ("Projets/Café Été 2026", 3) == (body["folder"], len(body["messages"]))


class TestExactMessageId:
    async def test_the_match_is_exact_and_case_sensitive(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        upper, lower = await seed(
            imap,
            folder,
            mail("A", message_id="<Case@Example.test>"),
            mail("B", message_id="<case@example.test>"),
        )
        assert [upper] == await mcp.uids(folder, message_id="Case@Example.test")
        assert [upper] == await mcp.uids(folder, message_id=" <Case@Example.test> ")
        assert [lower] == await mcp.uids(folder, message_id="case@example.test")

    async def test_quoted_local_parts_are_invalid_without_mailbox_access(self, mcp: Mcp) -> None:
        await mcp.error_without_access(
            {"action": "search", "search": {"message_id": '"quoted"@x.test'}}, "invalid_arguments"
        )

    async def test_collisions_duplicates_and_lists_do_not_match(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        good = await seed(
            imap,
            folder,
            mail("exact", message_id="(a comment)\r\n <id@x.test> (trailing)"),
            mail("suffix", message_id="<id@x.test.org>"),
            mail("prefix", message_id="<xid@x.test>"),
            mail("two ids", message_id="<id@x.test> <other@x.test>"),
            mail("twice", message_id="<id@x.test>", headers=["Message-ID: <id@x.test>"]),
            mail("elsewhere", headers=["References: <id@x.test>"]),
        )
        assert [good[0]] == await mcp.uids(folder, message_id="id@x.test")

    async def test_false_candidates_do_not_consume_the_limit(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        (first,) = await seed(imap, folder, mail("real 1", message_id="<dup@x.test>"))
        decoys = await seed(imap, folder, *[mail("decoy", message_id="<DUP@x.test>")] * 20)
        (second,) = await seed(imap, folder, mail("real 2", message_id="<dup@x.test>"))
        more = await seed(imap, folder, *[mail("decoy", message_id="<Dup@X.test>")] * 20)
        assert decoys and more
        pages = await mcp.all_pages(
            {
                "action": "search",
                "search": {"folder": folder, "message_id": "dup@x.test", "limit": 1},
            }
        )
        assert [[second], [first]] == [[m["uid"] for m in p["messages"]] for p in pages]
        assert [second] == [m["uid"] for m in pages[0]["messages"]]


class TestCursors:
    async def test_a_cursor_replayed_with_another_filter_is_invalid(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await seed(imap, folder, mail("a"), mail("b"))
        cursor = (await mcp.search(folder, limit=1))["next_cursor"]
        for changed in (
            {"query": "x"},
            {"order": "oldest"},
            {"unread": True},
            {"attention": True},
            {"folder": "INBOX"},
        ):
            search = {"folder": folder, "limit": 1, "cursor": cursor, **changed}
            await mcp.error_without_access(
                {"action": "search", "search": search}, "invalid_arguments"
            )

    async def test_the_limit_may_change_between_pages(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        u = await seed(imap, folder, *[mail(f"m{i}") for i in range(5)])
        cursor = (await mcp.search(folder, limit=1))["next_cursor"]
        assert u[3::-1] == await mcp.uids(folder, limit=10, cursor=cursor)

    async def test_search_and_triage_cursors_are_not_interchangeable(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await seed(imap, folder, mail("a"), mail("b"))
        search_cursor = (await mcp.search(folder, limit=1, attention=True))["next_cursor"]
        triage = await mcp.ok({"action": "triage", "search": {"folder": folder, "limit": 1}})
        await mcp.error(
            {"action": "triage", "search": {"folder": folder, "cursor": search_cursor}},
            "invalid_arguments",
        )
        await mcp.error(
            {"action": "search", "search": {"folder": folder, "cursor": triage["next_cursor"]}},
            "invalid_arguments",
        )

    async def test_a_garbled_cursor_is_invalid_without_mailbox_access(self, mcp: Mcp) -> None:
        await mcp.error_without_access(
            {"action": "search", "search": {"cursor": "WyJzMSIsMSwyLDMsIngiXQ"}},
            "invalid_arguments",
        )

    async def test_new_arrivals_stay_out_of_a_running_pagination(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        u = await seed(imap, folder, *[mail(f"m{i}") for i in range(3)])
        first = await mcp.search(folder, limit=1)
        (late,) = await seed(imap, folder, mail("late"))
        seen = [m["uid"] for m in first["messages"]]
        cursor = first.get("next_cursor")
        while cursor:
            page = await mcp.search(folder, limit=1, cursor=cursor)
            seen += [m["uid"] for m in page["messages"]]
            cursor = page.get("next_cursor")
        assert u[::-1] == seen
        assert late == (await mcp.uids(folder))[0]

    async def test_a_recreated_folder_makes_the_cursor_stale(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        before = await append_messages(imap, folder, [mail("a"), mail("b")])
        cursor = (await mcp.search(folder, limit=1))["next_cursor"]
        ok(await imap.delete(quote_mailbox(folder)), "DELETE")
        ok(await imap.create(quote_mailbox(folder)), "CREATE")
        after = await append_messages(imap, folder, [mail("a"), mail("b"), mail("c")])
        assert before.uidvalidity != after.uidvalidity
        body = await mcp.error(
            {"action": "search", "search": {"folder": folder, "cursor": cursor}}, "stale_reference"
        )
        assert "refresh_reference" == body["retry"]["action"]

    async def test_an_empty_window_still_carries_a_cursor_until_the_folder_is_covered(
        self, mcp: Mcp, services: Services, folder: str
    ) -> None:
        await sparse_folder(services, folder, 2500)
        pages = await mcp.all_pages({"action": "search", "search": {"folder": folder}})
        assert [[2500], [], [1]] == [[m["uid"] for m in p["messages"]] for p in pages]
        assert [1000, 1000, 500] == [p["scanned_uids"] for p in pages]
        assert ["next_cursor" in p for p in pages] == [True, True, False]

    async def test_oldest_order_crosses_the_same_gap(
        self, mcp: Mcp, services: Services, folder: str
    ) -> None:
        await sparse_folder(services, folder, 2500)
        pages = await mcp.all_pages(
            {"action": "search", "search": {"folder": folder, "order": "oldest"}}
        )
        assert [[1], [], [2500]] == [[m["uid"] for m in p["messages"]] for p in pages]


async def sparse_folder(services: Services, folder: str, top: int) -> None:
    """Leave only UIDs 1 and `top` in folder: copy one message onto itself, then expunge.

    This goes through the product's ImapSession: thousands of untagged EXPUNGE lines in one
    read break plain aioimaplib.
    """
    mailbox = ImapMailbox(
        ImapSettings(
            host=services.imap_host,
            port=services.imap_port,
            username=services.username,
            password=Secret(services.password),
            ca_file=str(services.ca_file),
            allow_private_hosts=True,
            timeout_s=30.0,
        )
    )
    try:
        async with mailbox.pool.session() as session:
            await session.append(folder, mail("first"))
            await session.select(folder)
            count = 1
            while count < top:
                step = min(count, top - count)
                await session.command(
                    "COPY", codec.raw(f"1:{step}"), codec.mailbox_arg(folder), uid=True
                )
                count += step
            gap = codec.raw(f"2:{top - 1}")
            await session.command("STORE", gap, codec.raw("+FLAGS.SILENT (\\Deleted)"), uid=True)
            await session.command("EXPUNGE", gap, uid=True)
    finally:
        await mailbox.aclose()


class TestDetailAndExactness:
    async def test_full_detail_has_no_hoisted_folder_and_full_references(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        raw = b"Subject: bare\r\nMessage-ID: <bare@x.test>\r\n\r\nno addresses\r\n"
        appended = await append_messages(imap, folder, [raw])
        body = await mcp.ok({"action": "search", "search": {"folder": folder}, "detail": "full"})
        assert "folder" not in body
        (row,) = body["messages"]
        assert {
            "folder": folder,
            "uid_validity": appended.uidvalidity,
            "uid": appended.uids[0],
        } == row["reference"]
        assert ([], []) == (row["from"], row["to"])

    async def test_modseq_and_uidvalidity_are_the_exact_server_integers(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        appended = await append_messages(imap, folder, [Append(mail("m"), flags=("\\Seen",))])
        ok(await imap.select(quote_mailbox(folder)), "SELECT")
        fetched = ok(await imap.uid("fetch", str(appended.uids[0]), "(MODSEQ)"), "FETCH")
        ok(await imap.close(), "CLOSE")
        modseq = int(re.search(rb"MODSEQ \((\d+)\)", b" ".join(map(bytes, fetched.lines)))[1])  # type: ignore[index]
        body = await mcp.search(folder)
        assert (appended.uidvalidity, modseq) == (
            body["uid_validity"],
            body["messages"][0]["modseq"],
        )

    async def test_searching_leaves_unread_mail_unread(
        self, mcp: Mcp, imap: aioimaplib.IMAP4_SSL, folder: str
    ) -> None:
        await seed(
            imap,
            folder,
            mail("unread", message_id="<u1@x.test>"),
            Append(mail("read", message_id="<r1@x.test>"), flags=("\\Seen",)),
            mail("reply", headers=["In-Reply-To: <u1@x.test>"]),
        )
        before = await live_flags(imap, folder)
        body = await mcp.search(folder)
        await mcp.ok({"action": "search", "search": {"folder": folder}, "detail": "full"})
        await mcp.search(folder, message_id="u1@x.test", query="unread")
        await mcp.ok({"action": "triage", "search": {"folder": folder}, "detail": "full"})
        ref = {
            "folder": folder,
            "uid_validity": body["uid_validity"],
            "uid": body["messages"][-1]["uid"],
        }
        await mcp.ok({"action": "conversation", "reference": ref})
        assert before == await live_flags(imap, folder)
        assert set() == before[body["messages"][-1]["uid"]]
