"""Search inputs after defaulting, and how they become IMAP SEARCH criteria."""

from __future__ import annotations

import msgspec
import pytest

from providers.imap.search import criteria, imap_date, needs_charset
from schemas.args.common import Search
from schemas.args.query import Conversation
from schemas.errors import InvalidArguments
from schemas.mailbox import Reference
from schemas.search import SearchQuery, conversation_query, normalize_message_id, search_query


def decoded(**fields: object) -> Search:
    return msgspec.convert(fields, Search, strict=True)


def wire(query: SearchQuery, literal_max: int = 0) -> str:
    return " ".join(criteria(query, literal_max))


class TestDefaults:
    def test_no_search_object_means_inbox_newest_25(self) -> None:
        query = search_query(msgspec.UNSET, "search")
        assert ("INBOX", "newest", 25, False) == (
            query.folder,
            query.order,
            query.limit,
            query.attention,
        )

    def test_empty_folder_and_order_take_the_defaults(self) -> None:
        query = search_query(decoded(folder="", order=""), "search")
        assert ("INBOX", "newest") == (query.folder, query.order)

    def test_limit_zero_means_25(self) -> None:
        assert 25 == search_query(decoded(limit=0), "search").limit

    def test_null_unread_and_flagged_equal_omitted_ones(self) -> None:
        assert search_query(decoded(), "search") == search_query(
            decoded(unread=None, flagged=None), "search"
        )

    def test_triage_forces_attention(self) -> None:
        assert search_query(decoded(), "triage").attention is True

    def test_search_attention_false_adds_nothing(self) -> None:
        assert search_query(decoded(attention=False), "search") == search_query(decoded(), "search")

    def test_message_id_is_normalized_before_binding(self) -> None:
        query = search_query(decoded(message_id=" <Case@Example.test> "), "search")
        assert "Case@Example.test" == query.message_id

    def test_conversation_keeps_the_anchor_exactly(self) -> None:
        args = msgspec.convert(
            {
                "action": "conversation",
                "reference": {"folder": "INBOX", "uid_validity": 7, "uid": 9},
                "search": {"order": "", "limit": 0},
            },
            Conversation,
            strict=True,
        )
        query = conversation_query(args)
        assert Reference("INBOX", 7, 9) == query.anchor
        assert ("newest", 25, "") == (query.order, query.limit, query.cursor)


class TestMessageIdFilter:
    @pytest.mark.parametrize(
        ("given", "expected"),
        [
            ("Case@Example.test", "Case@Example.test"),
            ("<Case@Example.test>", "Case@Example.test"),
            ("  <a.b+c@d.e>\t", "a.b+c@d.e"),
            ("x@[192.0.2.1]", "x@[192.0.2.1]"),
            ("{odd}!#$%&'*/=?^_`|~-@host", "{odd}!#$%&'*/=?^_`|~-@host"),
        ],
    )
    def test_modern_ids_are_accepted_with_case_kept(self, given: str, expected: str) -> None:
        assert expected == normalize_message_id(given)

    @pytest.mark.parametrize(
        "given",
        [
            '"quoted"@x.test',
            "no-at-sign",
            "a@b@c",
            "a..b@x",
            ".a@x",
            "a@x.",
            "a@(comment)x",
            "<a@x",
            "a@x>",
            "< a@x >",
            "a b@x",
            "a@[fold\\ed]",
            "é@x.test",
            "<a@x> <b@x>",
        ],
    )
    def test_obsolete_or_broken_ids_are_invalid_arguments(self, given: str) -> None:
        with pytest.raises(InvalidArguments):
            normalize_message_id(given)


class TestCriteria:
    def test_no_filters_add_no_criteria(self) -> None:
        assert "" == wire(SearchQuery(operation="search"))

    def test_text_and_header_filters(self) -> None:
        query = SearchQuery(operation="search", query="inv", from_="a", to="b", subject="c")
        assert 'TEXT "inv" HEADER FROM "a" HEADER TO "b" HEADER SUBJECT "c"' == wire(query)

    def test_participant_is_from_or_reply_to_or_to_or_cc_never_bcc(self) -> None:
        query = SearchQuery(operation="search", participant="pat")
        assert (
            'OR OR HEADER FROM "pat" HEADER REPLY-TO "pat" OR HEADER TO "pat" HEADER CC "pat"'
            == wire(query)
        )
        assert "BCC" not in wire(query)

    def test_message_id_prefilter_searches_the_bracketed_id(self) -> None:
        query = SearchQuery(operation="search", message_id="a@b.test")
        assert 'HEADER MESSAGE-ID "<a@b.test>"' == wire(query)

    def test_dates_are_inclusive_since_and_exclusive_before(self) -> None:
        query = SearchQuery(operation="search", since="2026-01-02", before="2026-01-03")
        assert "SINCE 2-Jan-2026 BEFORE 3-Jan-2026" == wire(query)

    def test_month_names_are_the_english_imap_ones_whatever_the_locale(self) -> None:
        assert ["1-Jan-2026", "31-Dec-2026"] == [
            imap_date("2026-01-01"),
            imap_date("2026-12-31"),
        ]

    @pytest.mark.parametrize(
        ("unread", "flagged", "expected"),
        [
            (True, None, "UNSEEN"),
            (False, None, "SEEN"),
            (None, True, "FLAGGED"),
            (None, False, "UNFLAGGED"),
            (True, False, "UNSEEN UNFLAGGED"),
        ],
    )
    def test_flag_filters(self, unread: bool | None, flagged: bool | None, expected: str) -> None:
        assert expected == wire(SearchQuery(operation="search", unread=unread, flagged=flagged))

    def test_attention_is_unseen_or_flagged_anded_with_explicit_flags(self) -> None:
        query = SearchQuery(operation="triage", attention=True, unread=False)
        assert "SEEN OR UNSEEN FLAGGED" == wire(query)

    def test_quotes_and_backslashes_are_escaped(self) -> None:
        assert 'TEXT "a\\"b\\\\c"' == wire(SearchQuery(operation="search", query='a"b\\c'))

    def test_ascii_text_needs_no_charset(self) -> None:
        assert not needs_charset(SearchQuery(operation="search", query="plain", subject="x"))

    @pytest.mark.parametrize("field", ["query", "from_", "to", "subject", "participant"])
    def test_any_non_ascii_text_needs_charset_utf8(self, field: str) -> None:
        assert needs_charset(
            msgspec.structs.replace(SearchQuery(operation="search"), **{field: "Zoë"})
        )

    def test_non_ascii_text_goes_out_as_a_literal_with_literal_plus(self) -> None:
        query = SearchQuery(operation="search", subject="Größe")
        assert "HEADER SUBJECT {7+}\r\nGröße" == wire(query, literal_max=2**31)

    def test_without_literal_plus_non_ascii_text_is_quoted_utf8(self) -> None:
        assert 'HEADER SUBJECT "Größe"' == wire(SearchQuery(operation="search", subject="Größe"))
