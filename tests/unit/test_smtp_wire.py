"""DATA transparency, line-ending normalization, enhanced status codes and bare mailboxes."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from providers.smtp.wire import (
    dot_stuff,
    enhanced_status,
    is_bare_mailbox,
    normalize_line_endings,
)


def unstuff(body: bytes) -> bytes:
    """What a server stores: each CRLF line with one leading dot removed (RFC 5321 §4.5.2)."""
    lines = body.split(b"\r\n")
    return b"\r\n".join(line[1:] if line.startswith(b".") else line for line in lines)


class TestDotStuffing:
    def test_a_line_starting_with_a_dot_gets_a_second_dot(self) -> None:
        assert b"a\r\n..b\r\n" == dot_stuff(b"a\r\n.b\r\n")

    def test_the_first_line_is_stuffed_too(self) -> None:
        assert b"..first\r\n" == dot_stuff(b".first\r\n")

    def test_a_lone_dot_line_cannot_end_the_data_early(self) -> None:
        stuffed = dot_stuff(b"Subject: x\r\n\r\nbefore\r\n.\r\nafter\r\n")
        assert b"\r\n.\r\n" not in stuffed
        assert b"Subject: x\r\n\r\nbefore\r\n..\r\nafter\r\n" == stuffed

    def test_a_double_dot_line_gets_a_third(self) -> None:
        assert b"...\r\n" == dot_stuff(b"..\r\n")

    def test_a_dot_inside_a_line_is_left_alone(self) -> None:
        assert b"a.b .c\r\n" == dot_stuff(b"a.b .c\r\n")

    def test_a_dot_after_a_bare_lf_is_stuffed(self) -> None:
        assert b"a\r\n..b\r\n" == dot_stuff(b"a\n.b")

    def test_a_dot_after_a_bare_cr_is_stuffed(self) -> None:
        assert b"a\r\n..b\r\n" == dot_stuff(b"a\r.b")

    def test_the_stuffed_body_never_carries_the_end_of_data_marker(self) -> None:
        assert not dot_stuff(b"x\r\n.\r\n").endswith(b"\r\n.\r\n")


class TestLineEndings:
    def test_bare_lf_becomes_crlf(self) -> None:
        assert b"a\r\nb\r\n" == normalize_line_endings(b"a\nb\n")

    def test_bare_cr_becomes_crlf(self) -> None:
        assert b"a\r\nb\r\n" == normalize_line_endings(b"a\rb\r")

    def test_crlf_is_kept(self) -> None:
        assert b"a\r\nb\r\n" == normalize_line_endings(b"a\r\nb\r\n")

    def test_cr_cr_lf_is_two_line_breaks(self) -> None:
        assert b"a\r\n\r\nb\r\n" == normalize_line_endings(b"a\r\r\nb")

    def test_a_body_without_a_final_newline_gets_one(self) -> None:
        assert b"a\r\nlast\r\n" == normalize_line_endings(b"a\r\nlast")

    def test_empty_stays_empty(self) -> None:
        assert b"" == normalize_line_endings(b"")


class TestStuffingProperties:
    @given(st.binary(max_size=2000))
    def test_unstuffing_the_stuffed_body_gives_the_crlf_normalized_original(
        self, raw: bytes
    ) -> None:
        assert normalize_line_endings(raw) == unstuff(dot_stuff(raw))

    @given(st.lists(st.sampled_from([b".", b"..", b"a", b"\r", b"\n", b"\r\n", b" "]), max_size=60))
    def test_dot_heavy_bodies_round_trip_and_never_hold_a_lone_dot_line(
        self, parts: list[bytes]
    ) -> None:
        raw = b"".join(parts)
        stuffed = dot_stuff(raw)
        assert normalize_line_endings(raw) == unstuff(stuffed)
        assert b".\r\n" != stuffed[:3]
        assert b"\r\n.\r\n" not in stuffed

    @given(st.binary(max_size=2000))
    def test_every_line_break_on_the_wire_is_crlf(self, raw: bytes) -> None:
        stuffed = dot_stuff(raw)
        assert re.search(rb"\r(?!\n)|(?<!\r)\n", stuffed) is None
        assert stuffed == b"" or stuffed.endswith(b"\r\n")


class TestEnhancedStatus:
    def test_it_is_read_from_the_start_of_the_reply(self) -> None:
        assert "5.1.1" == enhanced_status(550, "5.1.1 no such user (sink)")

    def test_only_the_first_line_counts(self) -> None:
        assert "2.0.0" == enhanced_status(250, "2.0.0 OK\n5.0.0 later")

    def test_a_class_that_disagrees_with_the_code_is_ignored(self) -> None:
        assert "" == enhanced_status(250, "5.1.1 no such user")

    def test_a_reply_without_one_gives_the_empty_string(self) -> None:
        assert "" == enhanced_status(250, "OK queued")

    def test_a_version_number_is_not_an_enhanced_status(self) -> None:
        assert "" == enhanced_status(250, "2.0.0.1 something")


class TestBareMailbox:
    def test_a_plain_address_is_bare(self) -> None:
        assert is_bare_mailbox("alice@example.test")

    def test_a_display_name_form_is_not(self) -> None:
        assert not is_bare_mailbox("Alice <alice@example.test>")

    def test_angle_brackets_are_refused(self) -> None:
        assert not is_bare_mailbox("<alice@example.test>")

    def test_crlf_and_nul_and_tab_are_refused(self) -> None:
        for bad in ("a@b\r\nRCPT TO:<c@d>", "a@b\n", "a\x00@b", "a\t@b"):
            assert not is_bare_mailbox(bad)

    def test_non_ascii_is_refused(self) -> None:
        assert not is_bare_mailbox("jörg@example.test")

    def test_an_address_needs_both_sides_of_the_at(self) -> None:
        for bad in ("alice", "@example.test", "alice@", ""):
            assert not is_bare_mailbox(bad)

    def test_254_bytes_is_the_limit(self) -> None:
        local = "a" * 64
        domain = "b" * (254 - 65)
        assert is_bare_mailbox(f"{local}@{domain}")
        assert not is_bare_mailbox(f"{local}@{domain}c")
