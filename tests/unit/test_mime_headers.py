"""Header helpers over raw bytes: blocks, RFC 2047 words, cleaning, addresses, dates, IDs."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.mime.encoded_words import decode_words
from providers.mime.header_block import (
    HEADER_BLOCK_LIMIT,
    FieldFinder,
    HeaderFields,
    HeaderRefused,
    UnknownField,
    header_bounds,
    parse_fields,
    parse_header_block,
    strict_fields,
)
from providers.mime.read.headers import (
    clean,
    display_value,
    message_ids,
    parse_addresses,
    parse_date,
)
from schemas.errors import SafetyLimit
from schemas.messages import Address

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")

header_values = st.one_of(
    st.binary(max_size=400),
    st.text(max_size=400),
    st.from_regex(r"(=\?[a-zA-Z0-9_*-]{0,12}\?[bqBQx]\?[A-Za-z0-9=_/+?]{0,16}\?=[ \t]?){0,6}"),
    st.from_regex(r'[ \t"()<>:;,@.a-z\\=?]{0,80}'),
)


def fixture_headers(name: str) -> HeaderFields:
    """Return the parsed top-level header block of a corpus file."""
    (path,) = CORPUS.glob(f"{name}-*.eml")
    return parse_header_block(path.read_bytes())


class TestHeaderBlock:
    def test_folded_values_are_unfolded_and_names_match_any_case(self) -> None:
        fields = parse_header_block(b"SUBJECT: one\r\n two\r\n\tthree\r\nTo: a@b\r\n\r\nbody")
        assert b"one two\tthree" == fields.get("subject")
        assert b"a@b" == fields.get("TO")
        assert "to" in fields

    def test_repeated_fields_are_all_kept_in_order(self) -> None:
        fields = parse_header_block(b"Received: 1\r\nX: y\r\nreceived: 2\r\n\r\n")
        assert [b"1", b"2"] == fields.get_all("Received")

    def test_bare_lf_framing_is_accepted(self) -> None:
        bounds = header_bounds(b"A: b\nC: d\n\nbody")
        assert (10, 11) == (bounds.header_end, bounds.body_start)

    def test_a_header_block_of_exactly_64_kib_is_accepted(self) -> None:
        block = b"X: " + b"a" * (HEADER_BLOCK_LIMIT - 5) + b"\r\n"
        assert HEADER_BLOCK_LIMIT == len(block)
        assert b"a" * (HEADER_BLOCK_LIMIT - 5) == parse_header_block(block + b"\r\nbody").get("X")

    def test_a_header_block_one_byte_over_64_kib_is_a_safety_limit(self) -> None:
        block = b"X: " + b"a" * (HEADER_BLOCK_LIMIT - 4) + b"\r\n"
        with pytest.raises(SafetyLimit):
            parse_header_block(block + b"\r\nbody")

    def test_many_short_lines_past_64_kib_are_a_safety_limit(self) -> None:
        with pytest.raises(SafetyLimit):
            parse_header_block(b"X: a\r\n" * 20_000 + b"\r\n")

    def test_a_line_that_is_no_field_ends_the_block_and_counts_as_malformed(self) -> None:
        raw = b"Subject: hi\r\nHello there\r\n\r\nmore"
        bounds = header_bounds(raw)
        assert bounds.separator_missing
        assert raw.index(b"Hello") == bounds.body_start
        assert 1 == parse_header_block(raw).malformed

    def test_a_leading_mbox_from_line_is_skipped(self) -> None:
        fields = parse_header_block(b"From alice@example.test Mon Jan 1\r\nSubject: s\r\n\r\n")
        assert 0 == fields.malformed
        assert b"s" == fields.get("Subject")

    def test_a_message_without_headers_has_an_empty_block(self) -> None:
        assert () == parse_header_block(b"\r\nbody only").fields

    @given(st.binary(max_size=2000))
    def test_arbitrary_bytes_parse_or_hit_the_limit(self, raw: bytes) -> None:
        try:
            fields = parse_header_block(raw, limit=512)
        except SafetyLimit:
            return
        assert all(name.isascii() for name, _ in fields.fields)


class TestDecodeWords:
    @pytest.mark.parametrize(
        ("fixture", "subject"),
        [
            ("21", "Réunion d'équipe — ordre du jour ✅"),
            ("22", "Merci beaucoup, Zoë"),
            ("23", "Résumé de la visite à Besançon"),
            (
                "24",
                "Status: Größenänderung und Übersicht für das Quartal — sehr lang, damit "
                "gefaltet wird (v2)",
            ),
            ("27", "Отчёт за квартал"),
            ("28", "会議の資料"),
        ],
    )
    def test_corpus_subjects_decode_in_their_charsets(self, fixture: str, subject: str) -> None:
        raw = fixture_headers(fixture).get("Subject")
        assert raw is not None
        assert subject == display_value(raw)

    def test_a_character_split_across_adjacent_words_is_joined(self) -> None:
        data = "日本".encode()
        first = base64.b64encode(data[:2]).decode()
        second = base64.b64encode(data[2:]).decode()
        assert "日本" == decode_words(f"=?utf-8?B?{first}?= =?UTF-8?B?{second}?=")

    def test_text_between_words_is_kept_and_whitespace_between_words_dropped(self) -> None:
        value = "a =?utf-8?Q?b?= =?utf-8?Q?c?= d =?utf-8?Q?e?="
        assert "a bc d e" == decode_words(value)

    def test_only_linear_white_space_between_words_is_dropped(self) -> None:
        assert ("ab", "a\xa0b") == (
            decode_words("=?utf-8?Q?a?= \t =?utf-8?Q?b?="),
            decode_words("=?utf-8?Q?a?=\xa0=?utf-8?Q?b?="),
        )

    def test_q_underscore_is_a_space(self) -> None:
        assert "x y" == decode_words("=?iso-8859-1?Q?x_y?=")

    def test_an_unknown_charset_gives_replacement_characters(self) -> None:
        assert "caf\ufffd" == decode_words("=?x-unknown-9?Q?caf=E9?=")

    def test_a_language_suffix_is_ignored(self) -> None:
        assert "é" == decode_words("=?utf-8*fr?Q?=C3=A9?=")

    def test_a_word_that_does_not_decode_stays_as_written(self) -> None:
        assert "=?utf-8?Q?café?=" == decode_words("=?utf-8?Q?café?=")
        assert "plain =?bad" == decode_words("plain =?bad")

    def test_raw_utf8_header_bytes_are_read_as_utf8(self) -> None:
        assert "Café" == decode_words("Café".encode())

    def test_raw_latin1_header_bytes_fall_back_to_windows_1252(self) -> None:
        assert "Café" == decode_words("Café".encode("latin-1"))

    @given(header_values)
    def test_never_raises(self, value: bytes | str) -> None:
        assert isinstance(decode_words(value), str)


class TestClean:
    def test_controls_are_removed_and_whitespace_collapsed(self) -> None:
        assert "a b c" == clean("  a\x00\x07 \t b\r\n\x1b c  ", 100)

    def test_bidi_overrides_are_removed(self) -> None:
        assert "abc" == clean("a\u202eb\u2066c", 100)

    def test_the_cut_lands_on_a_character_boundary(self) -> None:
        cut = clean("é" * 3000, 4096)
        assert "é" * 2048 == cut

    def test_a_four_byte_character_is_never_split(self) -> None:
        assert "🎉" == clean("🎉🎉", 7)

    @given(header_values, st.integers(min_value=0, max_value=300))
    def test_output_is_bounded_utf8_without_controls(self, value: bytes | str, limit: int) -> None:
        out = clean(value, limit)
        assert len(out.encode("utf-8")) <= limit
        assert CONTROLS.search(out) is None


class TestParseAddresses:
    def test_quoted_display_names_with_commas(self) -> None:
        to = fixture_headers("09").get("To")
        assert [
            Address(name="Martin, Alice", address="alice@example.test"),
            Address(name="Rivera, Hank", address="hank@example.test"),
        ] == parse_addresses(to or b"")

    def test_encoded_display_names(self) -> None:
        to = fixture_headers("24").get("To") or b""
        assert ["Alice Märtin", "Bøb"] == [a.name for a in parse_addresses(to)]
        sender = fixture_headers("22").get("From") or b""
        assert [Address(name="田中 ユキ", address="yuki@example.org")] == parse_addresses(sender)

    def test_bare_addresses_have_no_name(self) -> None:
        (first, second) = parse_addresses("chloe@example.org, dmitri@example.org")
        assert Address(address="chloe@example.org") == first
        assert {"address": "dmitri@example.org"} == {"address": second.address}

    def test_groups_contribute_their_members_only(self) -> None:
        value = 'Team: a@x.test, "B" <b@x.test>;, undisclosed-recipients:;, c@x.test'
        assert ["a@x.test", "b@x.test", "c@x.test"] == [a.address for a in parse_addresses(value)]

    def test_a_trailing_comment_names_a_bare_address(self) -> None:
        assert [Address(name="Bob Z", address="bob@x.test")] == parse_addresses(
            "bob@x.test (Bob Z)"
        )

    def test_entries_without_an_address_are_dropped(self) -> None:
        assert [] == parse_addresses('Nobody, "Only a name", <>, ;')

    def test_an_obsolete_route_is_removed(self) -> None:
        assert "u@h.test" == parse_addresses("<@r1.test,@r2.test:u@h.test>")[0].address

    def test_at_most_100_entries_are_kept(self) -> None:
        value = ", ".join(f"u{i}@x.test" for i in range(150))
        found = parse_addresses(value)
        assert 100 == len(found)
        assert "u99@x.test" == found[-1].address

    def test_names_and_addresses_are_cleaned_and_cut_at_1024_bytes(self) -> None:
        (entry,) = parse_addresses('"' + "n\x07" * 1000 + "é" * 600 + '" <' + "a" * 2000 + ">")
        assert len(entry.name.encode()) <= 1024
        assert "\x07" not in entry.name
        assert "a" * 1024 == entry.address

    @given(header_values)
    def test_never_raises_and_every_entry_has_a_clean_address(self, value: bytes | str) -> None:
        found = parse_addresses(value)
        assert len(found) <= 100
        for entry in found:
            assert entry.address
            assert CONTROLS.search(entry.address + entry.name) is None
            assert len(entry.address.encode()) <= 1024 >= len(entry.name.encode())


class TestParseDate:
    def test_a_date_keeps_its_offset(self) -> None:
        expected = datetime(2026, 3, 3, 10, 0, tzinfo=timezone(timedelta(hours=9)))
        assert expected == parse_date(fixture_headers("22").get("Date") or b"")

    def test_an_unknown_offset_is_read_as_utc(self) -> None:
        assert datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC) == parse_date(
            "Fri, 2 Jan 2026 03:04:05 -0000"
        )

    @pytest.mark.parametrize("value", ["", "yesterday", "Mon, 99 Foo 2026 99:99:99 +9999", "0"])
    def test_unparseable_dates_are_none(self, value: str) -> None:
        assert parse_date(value) is None

    @given(header_values)
    def test_never_raises_and_is_aware(self, value: bytes | str) -> None:
        parsed = parse_date(value)
        assert parsed is None or parsed.tzinfo is not None


class TestMessageIds:
    def test_references_are_listed_in_order(self) -> None:
        references = fixture_headers("34").get("References") or b""
        assert [
            "<q3-budget-1@example.test>",
            "<q3-budget-2@example.org>",
            "<q3-budget-3@example.test>",
            "<q3-budget-4@example.org>",
        ] == message_ids(references)

    def test_comments_folding_and_empty_brackets_are_ignored(self) -> None:
        assert ["<a@b>", "<c@d>"] == message_ids(" <a@b> (note)\r\n\t<> <x y> <c@d>")

    def test_100_ids_are_accepted_and_101_are_a_safety_limit(self) -> None:
        assert 100 == len(message_ids(" ".join(f"<{i}@x>" for i in range(100))))
        with pytest.raises(SafetyLimit):
            message_ids(" ".join(f"<{i}@x>" for i in range(101)))

    def test_an_id_of_1024_bytes_is_accepted_and_1025_is_a_safety_limit(self) -> None:
        assert 1 == len(message_ids("<" + "a" * 1022 + "@x>"))
        with pytest.raises(SafetyLimit):
            message_ids("<" + "a" * 1023 + "@x>")

    @given(header_values)
    def test_never_raises_anything_but_the_limit(self, value: bytes | str) -> None:
        try:
            ids = message_ids(value)
        except SafetyLimit:
            return
        assert all(i.startswith("<") and i.endswith(">") for i in ids)


FINDER = FieldFinder(("Content-Type", "Content-Disposition", "Content-Transfer-Encoding"))
header_lines = st.lists(
    st.one_of(
        st.sampled_from(["Content-Type", "content-TYPE ", "Content-Disposition", "X-A"]).map(
            lambda name: name + ":"
        ),
        st.sampled_from([" ", "\t", "Content-Typex:", "Content-Transfer-Encoding\t:"]),
        st.from_regex(r"[ -~\t\r]{0,20}", fullmatch=True),
    ).flatmap(
        lambda head: (
            st.just(head)
            | st.from_regex(r"[ -~\t\r]{0,12}", fullmatch=True).map(lambda tail: head + tail)
        )
    ),
    max_size=12,
)


class TestFieldFinder:
    @given(header_lines, st.sampled_from(["\r\n", "\n"]))
    def test_it_finds_what_parse_fields_finds_first(self, lines: list[str], newline: str) -> None:
        raw = (newline.join(lines) + newline + newline + "body").encode("ascii")
        bounds = header_bounds(raw)
        block = raw[bounds.header_start : bounds.header_end]
        parsed, found = parse_fields(block), FINDER.first_fields(block)
        for name in ("Content-Type", "Content-Disposition", "Content-Transfer-Encoding"):
            assert parsed.get(name) == found.get(name)

    def test_a_folded_value_is_unfolded_and_a_later_duplicate_ignored(self) -> None:
        block = b"X: 1\r\ncontent-type :\ttext/plain;\r\n\tcharset=utf-8\r\nContent-Type: b\r\n"
        assert b"text/plain;\tcharset=utf-8" == FINDER.first_fields(block).get("Content-Type")


ALLOWED = frozenset({"subject", "to"})


def refused(raw: bytes) -> str:
    with pytest.raises(HeaderRefused) as caught:
        strict_fields(raw, 0, len(raw), ALLOWED)
    return str(caught.value)


class TestStrictFields:
    def test_fields_are_unfolded_under_lower_case_names_with_the_body_start(self) -> None:
        raw = b"SUBJECT: one\r\n two\r\nto: a@b\r\n\r\nbody"
        assert ({"subject": b"one two", "to": b"a@b"}, len(raw) - 4) == strict_fields(
            raw, 0, len(raw), ALLOWED
        )

    def test_an_empty_block_is_no_fields(self) -> None:
        assert ({}, 2) == strict_fields(b"\r\nbody", 0, 6, ALLOWED)

    def test_a_foreign_field_is_an_unknown_field(self) -> None:
        with pytest.raises(UnknownField):
            strict_fields(b"X-A: 1\r\n\r\n", 0, 10, ALLOWED)

    @pytest.mark.parametrize(
        ("raw", "reason"),
        [
            (b"To: a\r\nTo: b\r\n\r\n", "more than once"),
            (b"To: a\r\n", "empty CRLF line"),
            (b"To: a\n\nbody", "empty CRLF line"),
            (b"To: a\nSubject: b\r\n\r\n", "bare CR or LF"),
            (b"To: a\rb\r\n\r\n", "bare CR or LF"),
            (b"To : a\r\n\r\n", "field or a continuation"),
            (b"To: a\r\nno field\r\n\r\n", "field or a continuation"),
            (b"From alice Mon Jan 1\r\nTo: a\r\n\r\n", "field or a continuation"),
            (b" folded\r\nTo: a\r\n\r\n", "continuation line"),
            (b"To: " + b"a" * HEADER_BLOCK_LIMIT + b"\r\n\r\n", "within 64 KiB"),
        ],
        ids=["twice", "unended", "lf-blank", "bare-lf", "bare-cr", "space-colon", "stray-line",
             "mbox-line", "leading-continuation", "oversized"],
    )  # fmt: skip
    def test_each_rule_broken_is_named(self, raw: bytes, reason: str) -> None:
        assert reason in refused(raw)
