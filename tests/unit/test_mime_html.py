"""HTML → text: hidden and active content dropped, structure as line breaks, safe links only."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.mime.html_text import (
    MAX_INPUT_BYTES,
    MAX_STACK,
    MAX_TOKENS,
    decode_references,
    html_to_text,
    link_target,
)

FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MIB = 1024 * 1024


def text_of(source: str) -> str:
    """Convert and return only the text, asserting no limit was hit."""
    result = html_to_text(source)
    assert not result.limits_hit
    return result.text


class TestContent:
    @pytest.mark.parametrize(
        "element", ["script", "style", "head", "template", "noscript", "iframe", "object", "title"]
    )
    def test_hidden_and_active_elements_lose_their_content(self, element: str) -> None:
        assert "before after" == text_of(f"before <{element}>gone</{element}> after")

    def test_script_content_is_raw_text_even_with_markup_inside(self) -> None:
        assert "a b" == text_of("a <script>if (x < 1) { document.write('<p>gone</p>') }</script> b")

    def test_an_unclosed_head_ends_at_the_body(self) -> None:
        assert "Body" == text_of("<html><head><title>T</title><meta charset=utf-8><body>Body")

    def test_elements_hidden_inline_or_by_a_style_sheet_class_are_dropped(self) -> None:
        source = (
            "<style>.pre, p.x { display: none } .shown { color: red }</style>"
            '<div style="display:none">a</div><div hidden>b</div><div class="pre">c</div>'
            '<p class="x">d</p><div class="shown">e</div>'
        )
        assert "e" == text_of(source)

    def test_block_elements_become_line_breaks_and_paragraphs_blank_lines(self) -> None:
        source = "<h1>Title</h1><p>one<br>two</p><div>three</div><ul><li>a</li><li>b</li></ul>"
        assert "Title\n\none\ntwo\n\nthree\n\n- a\n- b" == text_of(source)

    def test_table_cells_are_tab_separated_rows(self) -> None:
        source = "<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>"
        assert "A\tB\n1\t2" == text_of(source)

    def test_whitespace_collapses_outside_pre(self) -> None:
        assert "a b c\n\n  x\n    y" == text_of("  a \n\t b   c <pre>  x\n    y</pre>")

    def test_repeated_blank_lines_collapse_to_one(self) -> None:
        assert "a\n\nb" == text_of("a<p></p><p></p><br><br><br><div></div>b")

    def test_entities_are_decoded(self) -> None:
        source = "&amp; &lt;x&gt; &quot;q&quot; &#39; &eacute; &#8364; &#x2013; &nbsp;| &bogus;"
        assert '& <x> "q" \' é € \u2013 \u00a0| &bogus;' == text_of(source)

    def test_comments_doctype_and_processing_instructions_vanish(self) -> None:
        assert "a b" == text_of("<!DOCTYPE html><?xml version='1.0'?>a <!-- c > d --> b")

    def test_images_are_not_text(self) -> None:
        assert "x" == text_of('x<img src="https://t.example.org/p.gif" alt="pixel">')


class TestLinks:
    def test_absolute_web_and_mail_targets_follow_the_label(self) -> None:
        source = (
            '<a href="https://e.test/a?x=1&amp;y=2">A</a> <a href="http://e.test">B</a> '
            '<a href="mailto:n@e.test">C</a>'
        )
        expected = "A <https://e.test/a?x=1&y=2> B <http://e.test> C <mailto:n@e.test>"
        assert expected == text_of(source)

    @pytest.mark.parametrize(
        "href",
        [
            "/relative/path",
            "page.html",
            "//e.test/protocol-relative",
            "https://user:pass@e.test/",
            "https://user@e.test/",
            "javascript:alert(1)",
            "data:text/html,<b>x</b>",
            "ftp://e.test/file",
            "cid:logo@e.test",
            "http://[::1/",
            "https://e.test:99999/",
            "https://e.test/with space",
            "mailto:",
            "https://",
        ],
    )
    def test_other_targets_are_dropped_but_the_label_stays(self, href: str) -> None:
        assert "label" == text_of(f'<a href="{href}">label</a>')

    def test_a_target_over_2_kib_is_dropped(self) -> None:
        near = "https://e.test/" + "a" * (2048 - 15)
        assert near == link_target(near)
        assert "" == link_target(near + "a")

    def test_a_label_equal_to_its_target_is_not_repeated(self) -> None:
        assert "https://e.test/x" == text_of('<a href="https://e.test/x">https://e.test/x</a>')

    def test_a_link_inside_hidden_content_is_not_shown(self) -> None:
        assert "" == text_of('<div hidden><a href="https://e.test/">x</a></div>')


class TestLimits:
    def test_input_over_1_mib_is_cut_and_reported(self) -> None:
        result = html_to_text("<p>" + "word " * (MIB // 5) + "</p>tail")
        assert result.limits_hit
        assert "tail" not in result.text

    def test_input_of_1_mib_in_short_tokens_is_read_up_to_the_token_limit(self) -> None:
        result = html_to_text("<b>x</b>" * (MAX_INPUT_BYTES // 8))
        assert result.limits_hit
        assert MAX_TOKENS // 3 <= result.text.count("x") <= MAX_TOKENS // 3 + 1

    def test_20000_tokens_are_read_and_one_more_hits_the_limit(self) -> None:
        assert not html_to_text("<br>" * MAX_TOKENS).limits_hit
        assert html_to_text("<br>" * (MAX_TOKENS + 1)).limits_hit

    def test_a_text_token_over_64_kib_is_cut(self) -> None:
        result = html_to_text("é" * (33 * 1024))
        assert result.limits_hit
        assert 64 * 1024 == len(result.text.encode())

    def test_a_tag_over_64_kib_is_skipped_and_reported(self) -> None:
        result = html_to_text('a<img src="data:image/png;base64,' + "A" * 70_000 + '">b')
        assert ("ab", True) == (result.text, result.limits_hit)

    def test_a_stack_of_128_elements_is_read_and_129_hit_the_limit(self) -> None:
        assert "x" == text_of("<span>" * MAX_STACK + "x")
        result = html_to_text("<span>" * (MAX_STACK + 1) + "x")
        assert result.limits_hit

    @pytest.mark.parametrize(
        "source",
        [
            "<" * MIB,
            "<a" * (MIB // 2),
            "</" * (MIB // 2),
            "<?" * (MIB // 2),
            "<!" * (MIB // 2),
            '<a b="' + "x" * MIB,
            "<a b=\"x c='y " * (MIB // 14),
            "<a" + " " * MIB + ">",
            "<style>" + ".a{" * (MIB // 3),
            "<!--" * (MIB // 4),
        ],
        ids=["lt", "lt-a", "lt-slash", "lt-q", "lt-bang", "attr", "quotes", "spaces", "css", "cmt"],
    )
    def test_pathological_input_finishes_with_clean_text(self, source: str) -> None:
        # The stdlib HTMLParser takes minutes on several of these (quadratic); ours is linear.
        result = html_to_text(source)
        assert FORBIDDEN.search(result.text) is None


SOUP = [
    *("<p>", "</p>", "<a href='https://e.test/x'>", "</a>", "<script>", "</script>", "<br/>"),
    *("<!--", "-->", "&amp;", "&#0;", "&#x110000;", "<pre>", "</pre>", "<td>", "<tr>", "<li>"),
    *("<head>", "<body>", "<div hidden>", "</div>", "\r", "\x00", "<style>", "</style>"),
]


class TestNeverRaises:
    @settings(max_examples=300)
    @given(st.text(max_size=2000))
    def test_arbitrary_text_gives_clean_text(self, source: str) -> None:
        result = html_to_text(source)
        result.text.encode("utf-8")
        assert FORBIDDEN.search(result.text) is None

    @settings(max_examples=300)
    @given(
        st.lists(
            st.one_of(
                st.sampled_from(SOUP),
                st.text(max_size=20),
            ),
            max_size=60,
        )
    )
    def test_tag_soup_gives_clean_text(self, pieces: list[str]) -> None:
        result = html_to_text("".join(pieces))
        result.text.encode("utf-8")
        assert FORBIDDEN.search(result.text) is None


class TestReferences:
    def test_a_numeric_reference_of_thousands_of_digits_becomes_a_replacement_character(
        self,
    ) -> None:
        # html.unescape raises ValueError past 4,300 digits (the int conversion limit).
        assert "a\ufffdb" == text_of("a&#" + "9" * 5000 + ";b")

    def test_leading_zeros_do_not_count_as_digits(self) -> None:
        assert "AB" == text_of("&#" + "0" * 5000 + "65;&#x" + "0" * 5000 + "42;")

    def test_references_decode_exactly_like_the_standard_library(self) -> None:
        source = "&amp &ampx &copy2 &notin; &noti; &#128; &#x0; &#xD800; &#1114112; &bogus;"
        assert html.unescape(source) == decode_references(source)
