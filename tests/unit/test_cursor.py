"""Page cursors and UID windows, without a server."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.imap.cursor import (
    CONVERSATION_FORMAT,
    SEARCH_FORMAT,
    UID_MAX,
    CursorState,
    Window,
    check_generation,
    check_scope,
    decode_cursor,
    encode_cursor,
    next_bound,
    plan_window,
    scope_digest,
    take,
)
from providers.imap.search import search_scope
from schemas.errors import InvalidArguments, StaleReference
from schemas.search import Order, SearchQuery

SCOPE = scope_digest("search-v1", {"folder": "INBOX"})


def state(**changes: object) -> CursorState:
    base = CursorState(SEARCH_FORMAT, 1712345678, 640, 912, SCOPE)
    return msgspec.structs.replace(base, **changes)


def raw_token(payload: object) -> str:
    data = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class TestEncoding:
    def test_a_cursor_decodes_to_what_was_encoded(self) -> None:
        assert state() == decode_cursor(encode_cursor(state()), SEARCH_FORMAT)

    def test_the_largest_cursor_stays_far_below_512_characters(self) -> None:
        token = encode_cursor(state(uid_validity=UID_MAX, bound=UID_MAX, upper=UID_MAX))
        assert len(token) <= 128

    def test_a_cursor_is_base64url_without_padding(self) -> None:
        token = encode_cursor(state())
        assert "=" not in token and "+" not in token and "/" not in token

    def test_the_scope_digest_has_43_characters(self) -> None:
        assert 43 == len(SCOPE)


class TestRejectedTokens:
    @pytest.mark.parametrize(
        "token",
        [
            "",
            "not a cursor",
            "abc=",
            "a" * 513,
            "%%%%",
            raw_token(["s1", 1712345678, 640, 912]),
            raw_token(["s1", 1712345678, 640, 912, SCOPE, 1]),
            raw_token(["s1", 1712345678, 640.0, 912, SCOPE]),
            raw_token(["s1", "1712345678", 640, 912, SCOPE]),
            raw_token(["s1", True, 640, 912, SCOPE]),
            raw_token(["s1", 0, 640, 912, SCOPE]),
            raw_token(["s1", 1712345678, 1, 912, SCOPE]),
            raw_token(["s1", 1712345678, 640, UID_MAX + 1, SCOPE]),
            raw_token(["s1", 1712345678, 640, 912, "short"]),
            raw_token(["x9", 1712345678, 640, 912, SCOPE]),
            raw_token({"v": "s1"}),
        ],
    )
    def test_anything_but_an_issued_cursor_is_invalid_arguments(self, token: str) -> None:
        with pytest.raises(InvalidArguments):
            decode_cursor(token, SEARCH_FORMAT)

    def test_a_cursor_with_extra_json_whitespace_is_not_canonical(self) -> None:
        data = json.dumps(["s1", 1712345678, 640, 912, SCOPE]).encode()  # ", " separators
        token = base64.urlsafe_b64encode(data).decode().rstrip("=")
        with pytest.raises(InvalidArguments):
            decode_cursor(token, SEARCH_FORMAT)

    def test_changed_trailing_base64_bits_are_not_canonical(self) -> None:
        token = next(
            t for b in range(2, 40) if len(t := encode_cursor(state(bound=b))) % 4 in (2, 3)
        )
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        original = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        same_bytes = [
            variant
            for c in alphabet
            if c != token[-1]
            and base64.urlsafe_b64decode((variant := token[:-1] + c) + "=" * (-len(token) % 4))
            == original
        ]
        assert same_bytes
        for variant in same_bytes:
            with pytest.raises(InvalidArguments):
                decode_cursor(variant, SEARCH_FORMAT)

    def test_a_bound_above_the_frozen_upper_bound_is_invalid(self) -> None:
        with pytest.raises(InvalidArguments):
            decode_cursor(encode_cursor(state(bound=913)), SEARCH_FORMAT)

    def test_a_search_cursor_is_not_a_conversation_cursor(self) -> None:
        with pytest.raises(InvalidArguments, match="another operation"):
            decode_cursor(encode_cursor(state()), CONVERSATION_FORMAT)

    def test_a_cursor_bound_to_another_scope_is_invalid(self) -> None:
        with pytest.raises(InvalidArguments, match="other filters"):
            check_scope(state(), scope_digest("search-v1", {"folder": "Archive"}))


class TestGeneration:
    def test_another_uidvalidity_is_a_stale_reference(self) -> None:
        with pytest.raises(StaleReference):
            check_generation(state(), 1712345679, 2000)

    def test_an_upper_bound_beyond_uidnext_is_invalid(self) -> None:
        with pytest.raises(InvalidArguments):
            check_generation(state(upper=912), 1712345678, 912)

    def test_the_live_folder_may_have_grown(self) -> None:
        check_generation(state(upper=912), 1712345678, 5000)


def query(**changes: object) -> SearchQuery:
    return msgspec.structs.replace(SearchQuery(operation="search"), **changes)


class TestScope:
    def test_limit_and_cursor_are_not_bound(self) -> None:
        assert search_scope(query()) == search_scope(query(limit=99, cursor="abc"))

    @pytest.mark.parametrize(
        "changes",
        [
            {"operation": "triage", "attention": True},
            {"attention": True},
            {"folder": "Archive"},
            {"order": "oldest"},
            {"query": "x"},
            {"from_": "x"},
            {"to": "x"},
            {"subject": "x"},
            {"participant": "x"},
            {"message_id": "a@b"},
            {"since": "2026-01-01"},
            {"before": "2026-01-01"},
            {"unread": True},
            {"unread": False},
            {"flagged": True},
            {"flagged": False},
        ],
    )
    def test_every_filter_operation_folder_and_order_is_bound(
        self, changes: dict[str, object]
    ) -> None:
        assert search_scope(query()) != search_scope(query(**changes))

    def test_search_with_attention_and_triage_do_not_share_cursors(self) -> None:
        search = query(attention=True)
        triage = query(operation="triage", attention=True)
        assert search_scope(search) != search_scope(triage)


class TestWindows:
    def test_newest_starts_at_the_ceiling_and_spans_1000_uids(self) -> None:
        assert Window(1501, 2500) == plan_window("newest", 2500, None)

    def test_newest_never_goes_below_uid_1(self) -> None:
        assert Window(1, 41) == plan_window("newest", 41, None)

    def test_newest_continues_below_the_exclusive_bound(self) -> None:
        assert Window(501, 1500) == plan_window("newest", 2500, state(bound=1501, upper=2500))

    def test_oldest_starts_at_uid_1(self) -> None:
        assert Window(1, 1000) == plan_window("oldest", 2500, None)

    def test_oldest_continues_at_the_bound_up_to_the_ceiling(self) -> None:
        assert Window(2001, 2500) == plan_window("oldest", 2500, state(bound=2001, upper=2500))

    def test_scanned_uids_is_the_window_size(self) -> None:
        assert 1000 == Window(1501, 2500).size

    def test_newest_bound_is_the_window_low_end_when_not_cut(self) -> None:
        assert 1501 == next_bound("newest", Window(1501, 2500), 2500, None)

    def test_newest_bound_is_the_last_returned_uid_when_cut(self) -> None:
        assert 2400 == next_bound("newest", Window(1501, 2500), 2500, 2400)

    def test_newest_has_no_cursor_once_uid_1_was_scanned(self) -> None:
        assert next_bound("newest", Window(1, 500), 2500, None) is None

    def test_oldest_bound_is_past_the_window_or_past_the_cut(self) -> None:
        assert 1001 == next_bound("oldest", Window(1, 1000), 2500, None)
        assert 8 == next_bound("oldest", Window(1, 1000), 2500, 7)

    def test_oldest_has_no_cursor_once_the_ceiling_was_scanned(self) -> None:
        assert next_bound("oldest", Window(2001, 2500), 2500, None) is None

    def test_take_orders_and_cuts_at_the_limit(self) -> None:
        assert ([9, 7], 7) == take([3, 9, 7, 5], "newest", 2)
        assert ([3, 5], 5) == take([3, 9, 7, 5], "oldest", 2)
        assert ([9, 7, 5, 3], None) == take([3, 9, 7, 5], "newest", 4)


def page_through(matches: set[int], ceiling: int, order: Order, limit: int) -> list[list[int]]:
    """Simulate the provider's paging loop over a folder whose matching UIDs are known."""
    pages: list[list[int]] = []
    cursor: CursorState | None = None
    while True:
        window = plan_window(order, ceiling, cursor)
        assert window.size <= 1000
        inside = [u for u in matches if window.low <= u <= window.high]
        returned, last = take(inside, order, limit)
        pages.append(returned)
        bound = next_bound(order, window, ceiling, last)
        if bound is None:
            return pages
        cursor = decode_cursor(
            encode_cursor(CursorState(SEARCH_FORMAT, 7, bound, ceiling, SCOPE)), SEARCH_FORMAT
        )


class TestPagingProperties:
    @given(
        st.integers(1, 5000).flatmap(
            lambda ceiling: st.tuples(
                st.just(ceiling), st.sets(st.integers(1, ceiling), max_size=300)
            )
        ),
        st.sampled_from(["newest", "oldest"]),
        st.integers(1, 100),
    )
    def test_pages_return_every_match_once_in_order(
        self, folder: tuple[int, set[int]], order: Order, limit: int
    ) -> None:
        ceiling, matches = folder
        pages = page_through(matches, ceiling, order, limit)
        flat = [u for page in pages for u in page]
        assert sorted(matches, reverse=order == "newest") == flat
        assert all(len(page) <= limit for page in pages)

    def test_sparse_uids_1_and_2500_give_empty_pages_with_cursors_in_between(self) -> None:
        assert [[2500], [], [1]] == page_through({1, 2500}, 2500, "newest", 25)
