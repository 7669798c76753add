"""Summaries, compact rows, counts and page JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from providers.imap.fetch import internal_date, parse_fetch
from providers.imap.responses import ImapResponse
from providers.imap.summaries import rfc3339, summarize
from schemas.mailbox import Reference
from schemas.messages import Address
from schemas.search import (
    COVERAGE_NOTE,
    SELECTION_NOTE,
    CompactSummary,
    ConversationPage,
    MessageSummary,
    PageCounts,
    SearchFullPage,
    SearchPage,
    TriagePage,
    bound_flags,
    compact_row,
    page_counts,
)
from service.tool_call import success

UINT64_MAX = 18_446_744_073_709_551_615
REF = Reference("INBOX", 1712345678, 912)


def fetched(header: bytes, *, flags: bytes = b"\\Seen", extra: bytes = b"") -> dict[str, object]:
    head = (
        b"3 FETCH (UID 912 FLAGS (" + flags + b') INTERNALDATE "04-Mar-2026 08:15:00 +0000" '
        b"RFC822.SIZE 48211 " + extra + b"BODY[HEADER.FIELDS (DATE FROM TO SUBJECT)]<0> {%d}"
    ) % len(header)
    (attrs,) = parse_fetch(ImapResponse("OK", b"", [head, header, b")"]))
    return attrs


def summary(**changes: object) -> MessageSummary:
    base = MessageSummary(
        reference=REF,
        subject="Invoice 2026-031",
        from_=[Address(name="Vendor Billing", address="billing@vendor.test")],
        to=[],
        date="2026-03-04T09:15:00+01:00",
        flags=["\\Seen"],
        size_bytes=48211,
    )
    return msgspec.structs.replace(base, **changes)


class TestSummarize:
    def test_rfc2047_subject_and_names_are_decoded(self) -> None:
        header = (
            b"Date: Mon, 02 Mar 2026 09:15:00 +0100\r\n"
            b"From: =?utf-8?B?Wm/DqyDDmHJzdGVk?= <zoe@example.org>\r\n"
            b"To: =?iso-8859-1?Q?Alice_M=E4rtin?= <alice@example.test>,\r\n bob@example.test\r\n"
            b"Subject: Status: =?utf-8?Q?Gr=C3=B6=C3=9Fen?=\r\n\r\n"
        )
        result = summarize(fetched(header), REF)
        assert "Status: Größen" == result.subject
        assert [Address(name="Zoë Ørsted", address="zoe@example.org")] == result.from_
        assert ["Alice Märtin", ""] == [a.name for a in result.to]
        assert "2026-03-02T09:15:00+01:00" == result.date

    def test_an_unparseable_date_falls_back_to_the_internal_date(self) -> None:
        result = summarize(fetched(b"Date: someday\r\nSubject: x\r\n\r\n"), REF)
        assert "2026-03-04T08:15:00Z" == result.date

    def test_missing_headers_give_empty_subject_and_lists(self) -> None:
        result = summarize(fetched(b"\r\n"), REF)
        assert ("", [], []) == (result.subject, result.from_, result.to)

    def test_size_flags_and_exact_modseq_come_from_the_fetch(self) -> None:
        attrs = fetched(
            b"\r\n", flags=b"\\Seen \\Flagged $Label", extra=b"MODSEQ (%d) " % UINT64_MAX
        )
        result = summarize(attrs, REF)
        assert (48211, ["\\Seen", "\\Flagged", "$Label"], UINT64_MAX) == (
            result.size_bytes,
            result.flags,
            result.modseq,
        )

    def test_no_modseq_without_condstore_is_zero(self) -> None:
        assert 0 == summarize(fetched(b"\r\n"), REF).modseq

    def test_subject_controls_are_removed_and_the_subject_capped(self) -> None:
        header = b"Subject: a\x07b   c" + b"x" * 5000 + b"\r\n\r\n"
        result = summarize(fetched(header), REF)
        assert result.subject.startswith("ab c")
        assert 4096 >= len(result.subject.encode())


class TestDates:
    def test_zero_offset_is_written_z(self) -> None:
        assert "2026-02-04T08:00:00Z" == rfc3339(datetime(2026, 2, 4, 8, tzinfo=UTC))

    def test_other_offsets_are_kept(self) -> None:
        tz = timezone(timedelta(hours=-5))
        assert "2026-04-03T12:00:00-05:00" == rfc3339(datetime(2026, 4, 3, 12, tzinfo=tz))

    def test_offsets_with_seconds_become_utc(self) -> None:
        tz = timezone(timedelta(minutes=5, seconds=30))
        assert "2026-01-01T11:54:30Z" == rfc3339(datetime(2026, 1, 1, 12, tzinfo=tz))


class TestFlagBound:
    def test_up_to_100_flags_are_kept_in_server_order(self) -> None:
        flags = [f"$k{i}" for i in range(100)]
        assert flags == bound_flags(flags)

    def test_a_cut_off_seen_replaces_the_last_kept_keyword(self) -> None:
        flags = [f"$k{i}" for i in range(100)] + ["$late", "\\Seen", "\\flagged"]
        kept = bound_flags(flags)
        assert 100 == len(kept)
        assert ["$k97", "\\flagged", "\\Seen"] == kept[-3:]  # each took the last keyword slot

    def test_a_cut_off_system_flag_already_kept_is_not_repeated(self) -> None:
        flags = ["\\Seen"] + [f"$k{i}" for i in range(99)] + ["\\SEEN"]
        assert flags[:100] == bound_flags(flags)

    def test_duplicate_system_flags_give_way_when_no_keyword_is_left(self) -> None:
        flags = ["\\Seen"] * 100 + ["\\Flagged"]
        kept = bound_flags(flags)
        assert (100, "\\Flagged") == (len(kept), kept[-1])


class TestRows:
    def test_a_compact_row_carries_uid_instead_of_reference(self) -> None:
        row = compact_row(summary(), "INBOX", 1712345678)
        body = msgspec.to_builtins(row)
        assert 912 == body["uid"]
        assert "reference" not in body

    def test_empty_to_and_zero_modseq_are_omitted_from_compact_rows(self) -> None:
        body = msgspec.to_builtins(compact_row(summary(), "INBOX", 1712345678))
        assert {"uid", "subject", "from", "date", "flags", "size_bytes"} == set(body)

    def test_a_row_from_another_generation_keeps_its_full_reference(self) -> None:
        row = compact_row(summary(), "INBOX", 1)
        assert (0, REF) == (row.uid, row.reference)

    def test_full_summaries_always_carry_from_to_and_reference(self) -> None:
        body = msgspec.to_builtins(summary(from_=[]))
        assert ([], [], {"folder": "INBOX", "uid_validity": 1712345678, "uid": 912}) == (
            body["from"],
            body["to"],
            body["reference"],
        )
        assert "modseq" not in body

    def test_counts_overlap_and_compare_flags_in_any_case(self) -> None:
        rows = [
            summary(flags=[]),
            summary(flags=["\\SEEN", "\\flagged"]),
            summary(flags=["\\Flagged"]),
            summary(flags=["\\Seen"]),
        ]
        assert PageCounts(messages=4, unread=2, flagged=2, unread_and_flagged=1) == page_counts(
            rows
        )

    def test_an_empty_page_counts_zero(self) -> None:
        assert PageCounts(messages=0, unread=0, flagged=0, unread_and_flagged=0) == page_counts([])


def structured(page: msgspec.Struct) -> dict[str, object]:
    result = success(page)
    assert json.loads(result.text) == result.structured
    return result.structured


class TestPageJson:
    def test_a_summary_page_hoists_folder_and_uid_validity(self) -> None:
        row = compact_row(summary(modseq=UINT64_MAX), "INBOX", 1712345678)
        page = SearchPage(
            folder="INBOX",
            uid_validity=1712345678,
            messages=[row],
            scanned_uids=1000,
            order="newest",
            next_cursor="abc",
        )
        body = structured(page)
        assert {
            "folder",
            "uid_validity",
            "messages",
            "scanned_uids",
            "order",
            "next_cursor",
        } == set(body)
        assert UINT64_MAX == body["messages"][0]["modseq"]  # type: ignore[index]
        assert f'"modseq":{UINT64_MAX}' in success(page).text

    def test_a_page_without_cursor_has_no_next_cursor_key(self) -> None:
        page = SearchPage(
            folder="INBOX", uid_validity=1, messages=[], scanned_uids=0, order="oldest"
        )
        assert "next_cursor" not in structured(page)

    def test_a_full_page_has_no_hoisted_folder(self) -> None:
        page = SearchFullPage(
            messages=[summary()], uid_validity=1712345678, scanned_uids=5, order="newest"
        )
        body = structured(page)
        assert {"messages", "uid_validity", "scanned_uids", "order"} == set(body)

    def test_a_triage_page_adds_counts_and_selection(self) -> None:
        page = TriagePage[CompactSummary](
            folder="INBOX",
            uid_validity=1,
            messages=[],
            scanned_uids=0,
            order="newest",
            page_counts=page_counts([]),
            selection=SELECTION_NOTE,
        )
        body = structured(page)
        assert SELECTION_NOTE == body["selection"]
        assert {"messages": 0, "unread": 0, "flagged": 0, "unread_and_flagged": 0} == body[
            "page_counts"
        ]

    @pytest.mark.parametrize("row", [CompactSummary, MessageSummary])
    def test_a_conversation_page_adds_anchor_and_coverage(self, row: type) -> None:
        page = ConversationPage[row](  # type: ignore[valid-type]
            folder="INBOX",
            uid_validity=1712345678,
            messages=[],
            scanned_uids=1000,
            order="newest",
            anchor=REF,
            coverage=COVERAGE_NOTE,
        )
        body = structured(page)
        assert {"folder": "INBOX", "uid_validity": 1712345678, "uid": 912} == body["anchor"]
        assert COVERAGE_NOTE == body["coverage"]


class TestInternalDate:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            (b"17-Jul-1996 02:44:25 -0700", "1996-07-17T02:44:25-07:00"),
            (b" 5-jan-2026 10:00:00 +0000", "2026-01-05T10:00:00+00:00"),
            (b"05-DEC-2026 23:59:59 +0530", "2026-12-05T23:59:59+05:30"),
        ],
    )
    def test_rfc3501_date_times_parse_whatever_the_locale(self, raw: bytes, expected: str) -> None:
        parsed = internal_date({"INTERNALDATE": raw})
        assert parsed is not None and expected == parsed.isoformat()

    @pytest.mark.parametrize(
        "raw",
        [b"31-Feb-2026 10:00:00 +0000", b"05-Foo-2026 10:00:00 +0000",
         b"05-Jan-2026 25:00:00 +0000", b"05-Jan-2026 10:00:00 +2400", b"05-Jan-2026 10:00:00",
         b"", b"\xff"],
    )  # fmt: skip
    def test_anything_else_is_no_date(self, raw: bytes) -> None:
        assert internal_date({"INTERNALDATE": raw}) is None
