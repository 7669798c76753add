"""The plain alternative derived from authored HTML."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from providers.mime.compose import compose_new, derive_plain_text
from schemas.args.common import Message
from schemas.compose import Identity
from schemas.errors import InvalidArguments

SPEC_EXAMPLE = (
    "<html><head><style>p{color:red}</style></head><body><p>Hello &amp; 你好</p>"
    "<div>Next<br>line</div><script>alert(1)</script></body></html>"
)


class TestDerivation:
    def test_the_spec_example(self) -> None:
        assert "Hello & 你好\nNext\nline" == derive_plain_text(SPEC_EXAMPLE)

    def test_an_html_only_new_message_gains_the_derived_text(self) -> None:
        composed = compose_new(
            Message(to=["b@example.test"], html=SPEC_EXAMPLE),
            identity=Identity(sender="alice@example.test"),
            prepared_id="0" * 32,
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        assert "Hello & 你好\nNext\nline" == composed.text
        assert SPEC_EXAMPLE == composed.html

    @pytest.mark.parametrize(
        "tag", ["head", "script", "style", "template", "noscript", "iframe", "object"]
    )
    def test_non_content_subtrees_are_skipped(self, tag: str) -> None:
        assert "before\nafter" == derive_plain_text(
            f"<p>before</p><{tag}><b>hidden</b></{tag}><p>after</p>"
        )

    def test_table_cells_are_separated_by_spaces_and_rows_by_lines(self) -> None:
        html = "<table><tr><th>Item</th><th>Cost</th></tr><tr><td>Tea</td><td>3</td></tr></table>"
        assert "Item Cost\nTea 3" == derive_plain_text(html)

    def test_whitespace_collapses_and_empty_lines_drop(self) -> None:
        html = (
            "<div>  a \t b  </div>\n\n<p>   </p><li>c</li><h2>d</h2>"
            "<blockquote>e</blockquote><pre>f</pre>"
        )
        assert "a b\nc\nd\ne\nf" == derive_plain_text(html)

    def test_entities_and_unknown_references_are_decoded_or_kept(self) -> None:
        assert "<a> © AT&T €" == derive_plain_text("&lt;a&gt; &copy; AT&T &#x20ac;")

    def test_unclosed_paragraphs_do_not_count_as_nesting(self) -> None:
        assert 600 == len(derive_plain_text("<p>x" * 600).split("\n"))

    def test_nothing_is_fetched_or_kept_from_markup(self) -> None:
        html = '<img src="https://tracker.example/p.gif"><a href="https://x.example">link</a>'
        assert "link" == derive_plain_text(html)


class TestFailures:
    @pytest.mark.parametrize("reference", ["&#x01;", "&#x0b;", "&#1;", "&#x7f;"])
    def test_character_references_to_controls_fail(self, reference: str) -> None:
        with pytest.raises(InvalidArguments, match=r"message\.text"):
            derive_plain_text(f"<p>a{reference}b</p>")

    def test_513_nested_divs_fail_and_512_succeed(self) -> None:
        with pytest.raises(InvalidArguments, match=r"provide message\.text"):
            derive_plain_text("<div>" * 513 + "x")
        assert "x" == derive_plain_text("<div>" * 512 + "x")

    def test_the_text_is_not_derived_when_given(self) -> None:
        composed = compose_new(
            Message(to=["b@example.test"], text="mine", html="<p>&#x01;</p>"),
            identity=Identity(sender="alice@example.test"),
            prepared_id="0" * 32,
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        assert "mine" == composed.text


class TestBounds:
    def test_markup_cut_off_by_the_end_of_the_input_is_dropped(self) -> None:
        assert "a" == derive_plain_text("<p>a</p><a hr")

    def test_a_numeric_reference_beyond_unicode_becomes_a_replacement_character(self) -> None:
        assert "a\ufffdb" == derive_plain_text("a&#" + "9" * 5000 + ";b")

    def test_a_control_reference_behind_thousands_of_zeros_still_fails(self) -> None:
        with pytest.raises(InvalidArguments, match=r"message\.text"):
            derive_plain_text("a&#" + "0" * 5000 + "1;b")

    def test_a_megabyte_of_unclosed_tags_derives_every_line(self) -> None:
        html = "<li>x" * (1024 * 1024 // 5)
        assert ["x"] * (1024 * 1024 // 5) == derive_plain_text(html).split("\n")
