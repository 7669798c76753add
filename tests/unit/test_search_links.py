"""Strict reading of Message-ID/References/In-Reply-To sections."""

from __future__ import annotations

import math

import pytest

from providers.imap.conversation import (
    LINK_FIELDS,
    parse_id_list,
    parse_link_section,
    prefilter,
    seed_ids,
)
from schemas.errors import SafetyLimit, ServiceUnavailable


def or_depth(words: list[str], at: int) -> tuple[int, int]:
    """Return the OR nesting depth of the prefix expression at `at` and where it ends."""
    if words[at] == "OR":
        left, after_left = or_depth(words, at + 1)
        right, end = or_depth(words, after_left)
        return 1 + max(left, right), end
    assert "HEADER" == words[at]
    return 0, at + 3


def section(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class TestSections:
    def test_all_three_fields_are_read_with_case_kept(self) -> None:
        parsed = parse_link_section(
            section(
                "Message-ID: <M3@x.test>",
                "References: <root@x.test> <m2@x.test>",
                "In-Reply-To: <m2@x.test>",
            ),
            LINK_FIELDS,
        )
        assert {
            "MESSAGE-ID": ["M3@x.test"],
            "REFERENCES": ["root@x.test", "m2@x.test"],
            "IN-REPLY-TO": ["m2@x.test"],
        } == parsed

    def test_folding_and_comments_around_ids_are_allowed(self) -> None:
        parsed = parse_link_section(
            section("References: (first) <a@x.test>", "\t<b@x.test> (nested (c) \\) ok)"),
            LINK_FIELDS,
        )
        assert {"REFERENCES": ["a@x.test", "b@x.test"]} == parsed

    def test_a_section_without_the_fields_is_empty(self) -> None:
        assert {} == parse_link_section(b"\r\n", LINK_FIELDS)

    @pytest.mark.parametrize(
        "raw",
        [
            section("Message-ID: <a@x.test>", "Message-ID: <a@x.test>"),
            section("Subject: <a@x.test>"),
            section("Message-ID: <a@x.test> junk"),
            section('Message-ID: <"q"@x.test>'),
            section("Message-ID: <a@x.test"),
            section("Message-ID: (open <a@x.test>"),
            section("Message-ID: <a@x.test>\nX: y"),
            section(" <a@x.test>"),
            section("no colon here"),
            "Message-ID: <é@x.test>\r\n\r\n".encode(),
        ],
    )
    def test_malformed_sections_are_none(self, raw: bytes) -> None:
        assert parse_link_section(raw, LINK_FIELDS) is None

    def test_a_section_without_its_final_empty_line_is_a_server_fault(self) -> None:
        with pytest.raises(ServiceUnavailable):
            parse_link_section(b"Message-ID: <a@x.test>\r\n", LINK_FIELDS)

    def test_a_section_over_64_kib_is_a_safety_limit(self) -> None:
        with pytest.raises(SafetyLimit):
            parse_link_section(section("References: " + "(x)" * 22_000), LINK_FIELDS)

    def test_more_than_100_ids_in_a_section_is_a_safety_limit(self) -> None:
        refs = " ".join(f"<r{i}@x.test>" for i in range(100))
        raw = section("Message-ID: <m@x.test>", f"References: {refs}")
        with pytest.raises(SafetyLimit):
            parse_link_section(raw, LINK_FIELDS)

    def test_an_id_over_1024_bytes_is_a_safety_limit(self) -> None:
        with pytest.raises(SafetyLimit):
            parse_link_section(section(f"References: <{'a' * 1020}@x.test>"), LINK_FIELDS)

    def test_without_enforced_limits_an_oversized_id_is_merely_malformed(self) -> None:
        raw = section(f"Message-ID: <{'a' * 1020}@x.test>")
        assert parse_link_section(raw, ("MESSAGE-ID",), enforce_limits=False) is None

    def test_only_the_requested_fields_may_appear(self) -> None:
        raw = section("Message-ID: <a@x.test>", "References: <b@x.test>")
        assert parse_link_section(raw, ("MESSAGE-ID",)) is None

    def test_an_empty_id_list_is_no_ids(self) -> None:
        assert [] == parse_id_list("  (only a comment) ")


class TestSeedAndPrefilter:
    def test_the_seed_is_every_id_sorted_and_distinct(self) -> None:
        links = {"MESSAGE-ID": ["m2@x"], "IN-REPLY-TO": ["root@x"], "REFERENCES": ["root@x"]}
        assert ["m2@x", "root@x"] == seed_ids(links)

    def test_one_id_searches_its_three_fields_as_a_balanced_or_tree(self) -> None:
        assert (
            'OR HEADER MESSAGE-ID "<a@x>" OR HEADER REFERENCES "<a@x>" HEADER IN-REPLY-TO "<a@x>"'
            == " ".join(prefilter(["a@x"]))
        )

    def test_the_tree_stays_shallow_for_many_ids(self) -> None:
        words = [str(w) for w in prefilter([f"id{i}@x.test" for i in range(100)])]
        deepest, end = or_depth(words, 0)
        assert (299, math.ceil(math.log2(300)), len(words)) == (words.count("OR"), deepest, end)

    def test_a_prefilter_over_64_kib_is_a_safety_limit(self) -> None:
        with pytest.raises(SafetyLimit):
            prefilter([f"{'a' * 1000}{i}@x.test" for i in range(30)])
