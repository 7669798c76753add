# ruff: noqa: RUF001  (the corpus deliberately contains typographic characters)
"""parse_message over the fixture corpus and synthetic messages at every read limit."""

from __future__ import annotations

import base64
import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.mime.read.parse import HTML_WARNING, TEXT_LIMIT, parse_message
from schemas.messages import SAFE_HEADER_KEYS, Address, AttachmentMeta, ParsedMessage

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
MIB = 1024 * 1024
KIB = 1024
FORBIDDEN_IN_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
FORBIDDEN_IN_HEADERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def fixture(number: str) -> bytes:
    """Return the raw bytes of corpus file NN-*.eml."""
    (path,) = CORPUS.glob(f"{number}-*.eml")
    return path.read_bytes()


@cache
def generator() -> ModuleType:
    """Import fixtures/mail/generate.py, the source of truth for the corpus bytes."""
    spec = importlib.util.spec_from_file_location("fixture_generator", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixture_generator"] = module
    spec.loader.exec_module(module)
    return module


def entity(headers: list[tuple[str, str]], body: bytes) -> bytes:
    """Build one MIME entity from header pairs and a body."""
    return b"".join(f"{k}: {v}\r\n".encode() for k, v in headers) + b"\r\n" + body


def multipart(
    parts: list[bytes], boundary: str = "b0", subtype: str = "mixed", extra: str = ""
) -> bytes:
    """Build a multipart entity with a closing delimiter."""
    delimiter = b"--" + boundary.encode()
    body = b"".join(delimiter + b"\r\n" + part + b"\r\n" for part in parts)
    content_type = f'multipart/{subtype}; boundary="{boundary}"'
    return entity(
        [("Content-Type", content_type), *extra_headers(extra)], body + delimiter + b"--\r\n"
    )


def extra_headers(extra: str) -> list[tuple[str, str]]:
    """Parse "Name: value" lines given as one string."""
    return [tuple(line.split(": ", 1)) for line in extra.splitlines() if line]  # type: ignore[misc]


def plain(text: str | bytes, charset: str = "utf-8", encoding: str = "8bit") -> bytes:
    """Build a text/plain entity."""
    body = text.encode(charset) if isinstance(text, str) else text
    headers = [
        ("Content-Type", f"text/plain; charset={charset}"),
        ("Content-Transfer-Encoding", encoding),
    ]
    return entity(headers, body)


def assert_clean(message: ParsedMessage) -> None:
    """Check the invariants every parse result keeps."""
    message.text.encode("utf-8")  # valid UTF-8: no lone surrogates
    assert FORBIDDEN_IN_TEXT.search(message.text) is None
    assert len(message.text.encode("utf-8")) <= TEXT_LIMIT
    assert set(message.headers) <= set(SAFE_HEADER_KEYS)
    for value in message.headers.values():
        assert value and FORBIDDEN_IN_HEADERS.search(value) is None
        assert len(value.encode("utf-8")) <= 4096
    assert [a.index for a in message.attachments] == list(range(1, len(message.attachments) + 1))
    assert bool(message.warnings) == (message.truncated or message.html_derived)


class TestCorpusText:
    @pytest.mark.parametrize(
        ("number", "words"),
        [
            ("06", ["Le café de la réunion était très bon.", "À bientôt !", "Chloé"]),
            ("13", ["Grüße aus Köln! 🎉 Das Fest beginnt um 19 Uhr.", "15 € pro Person"]),
            ("23", ["Ci-joint le résumé de la visite à Besançon."]),
            ("25", ["Chère Alice,", "Les crêpes de Noël étaient délicieuses.", "Ça coûte"]),
            ("26", ["“Smart quotes” and ‘single ones’ —", "an ellipsis… and 20 € too.", "™"]),
            ("26", ["bullet • and dagger †."]),
            ("27", ["Привет, Алиса!", "Отчёт за квартал готов. Встреча в четверг.", "Дмитрий"]),
            ("28", ["アリスさん", "来週の会議の資料を送ります。よろしくお願いします。", "田中"]),
            ("29", ["Γειά σου κόσμε · Привет мир · こんにちは世界 · 🌍🚀"]),
            ("41", ["Le projet « Café Été 2026 » démarre lundi."]),
        ],
    )
    def test_charset_bodies_decode_to_the_generators_text(
        self, number: str, words: list[str]
    ) -> None:
        message = parse_message(fixture(number))
        for word in words:
            assert word in message.text
        assert not message.truncated

    @pytest.mark.parametrize("path", sorted(CORPUS.glob("*.eml")), ids=lambda p: p.name[:2])
    def test_every_message_under_5_mib_parses_completely(self, path: Path) -> None:
        raw = path.read_bytes()
        message = parse_message(raw, rfc822_size=len(raw))
        assert_clean(message)
        assert message.truncated == (len(raw) > 5 * MIB)
        assert "\r" not in message.text

    def test_line_endings_become_lf(self) -> None:
        assert "Hi Alice,\n\nWelcome to the team mailbox. Nothing to do here yet.\n\nBob\n" == (
            parse_message(fixture("01")).text
        )

    def test_alternative_mail_shows_the_plain_part(self) -> None:
        message = parse_message(fixture("12"))
        assert "Planning meeting moved to Thursday 10:00, room B.\n\nBob\n" == message.text
        assert not message.html_derived
        assert [] == message.warnings

    def test_text_parts_are_joined_in_walk_order_with_a_newline(self) -> None:
        raw = multipart([plain("one"), plain("two"), plain("three")])
        assert "one\ntwo\nthree" == parse_message(raw).text


class TestHeaders:
    def test_the_safe_headers_are_decoded_and_cleaned(self) -> None:
        message = parse_message(fixture("24"))
        assert {
            "From": "Grete Lund <grete@example.org>",
            "To": "Alice Märtin <alice@example.test>, Bøb <bob@example.test>",
            "Subject": "Status: Größenänderung und Übersicht für das Quartal — sehr lang, "
            "damit gefaltet wird (v2)",
            "Date": "Thu, 05 Mar 2026 08:20:00 +0100",
            "Message-Id": "<encoded-mixed-words.202603050820@example.org>",
        } == message.headers

    def test_cc_reply_to_and_date_are_parsed(self) -> None:
        message = parse_message(fixture("02"))
        assert [Address(name="Hank Rivera", address="hank@example.test")] == message.from_
        assert ["alice@example.test", "bob@example.test"] == [a.address for a in message.to]
        assert ["chloe@example.org", "ops-archive@example.test"] == [a.address for a in message.cc]
        assert [Address(name="Ops Team", address="team-ops@example.test")] == message.reply_to
        assert message.date is not None and "2026-01-06T14:03:00-05:00" == message.date.isoformat()

    def test_thread_headers_and_message_id(self) -> None:
        message = parse_message(fixture("33"))
        assert "<q3-budget-3@example.test>" == message.headers["In-Reply-To"]
        assert message.headers["References"].startswith("<q3-budget-1@example.test> ")
        assert "<q3-budget-4@example.org>" == message.message_id

    def test_a_missing_subject_is_absent_from_headers_and_empty(self) -> None:
        message = parse_message(fixture("07"))
        assert "Subject" not in message.headers
        assert "" == message.subject

    def test_bcc_is_never_exposed(self) -> None:
        raw = entity([("Bcc", "secret@example.test"), ("Subject", "s")], b"body")
        message = parse_message(raw)
        encoded = msgspec.json.encode(message)
        assert b"secret@example.test" not in encoded
        assert {"Subject": "s"} == message.headers

    def test_from_is_serialized_under_its_wire_name(self) -> None:
        wire = msgspec.to_builtins(parse_message(fixture("01")))
        assert [{"name": "Bob Okafor", "address": "bob@example.test"}] == wire["from"]

    def test_header_values_are_cut_at_4096_bytes(self) -> None:
        raw = entity([("Subject", "é" * 3000)], b"x")
        message = parse_message(raw)
        assert "é" * 2048 == message.subject == message.headers["Subject"]

    def test_a_top_header_block_over_64_kib_is_truncated_with_a_header_warning(self) -> None:
        raw = entity([("X-Big", "a" * (64 * KIB))], b"body")
        message = parse_message(raw)
        assert message.truncated
        assert {} == message.headers
        assert any("headers could not be parsed within limits" in w for w in message.warnings)


class TestHtmlOnly:
    def test_the_newsletter_keeps_text_and_links_but_no_active_content(self) -> None:
        message = parse_message(fixture("10"))
        assert message.html_derived
        assert not message.truncated
        assert [HTML_WARNING] == message.warnings
        text = message.text
        for gone in ("tracking", "navigator", "secret", "alert", "font-family", "pixel.gif"):
            assert gone not in text
        assert "Preheader text you should not see" not in text
        assert "Spring news & updates" in text
        assert "Café prices drop by 10\u00a0€ — see the announcement" in text
        assert "<https://news.example.org/spring?utm=1&id=7>" in text
        assert 'Use code <SPRING> "today" – it\'s free.' in text
        assert "- First link <https://news.example.org/a>" in text
        assert "- Write to us <mailto:news@example.org>" in text

    def test_the_receipt_table_reads_row_by_row(self) -> None:
        text = parse_message(fixture("11")).text
        assert "Coffee beans & filters\t12,50\u00a0€\nMug <large>\t8,00\u00a0€" in text
        assert "Total: 20,50\u00a0€" in text
        assert "View your order <https://shop.example.org/orders/1234>" in text


class TestAttachmentInventory:
    def test_an_inline_image_is_an_attachment(self) -> None:
        png = generator().tiny_png()
        assert [
            AttachmentMeta(
                index=1,
                filename="logo.png",
                content_type="image/png; name=logo.png",
                size_bytes=len(png),
            )
        ] == parse_message(fixture("14")).attachments

    def test_a_forwarded_message_is_one_opaque_attachment(self) -> None:
        message = parse_message(fixture("19"))
        (attachment,) = message.attachments
        assert "message/rfc822" == attachment.content_type
        assert "Venue confirmed.eml" == attachment.filename
        assert "Original message" not in message.text
        assert "Forwarding the confirmation below.\n\nBob\n" == message.text

    def test_rfc_2231_names_and_parameters_are_reserialized(self) -> None:
        message = parse_message(fixture("16"))
        assert [
            AttachmentMeta(
                index=1,
                filename="export.csv",
                content_type="text/csv; charset=us-ascii; name=export.csv",
                size_bytes=37,
            ),
            AttachmentMeta(
                index=2,
                filename="Résumé café.txt",
                content_type='text/plain; charset=utf-8; name="Résumé café.txt"',
                size_bytes=len("Notes about the café été budget.\r\n".encode()),
            ),
        ] == message.attachments
        assert "Two files: the CSV export and my notes.\n" == message.text

    def test_the_large_attachment_is_listed_with_its_decoded_size(self) -> None:
        size = len(generator().fake_pdf("Large report", 2 * MIB + 300 * KIB))
        message = parse_message(fixture("17"))
        assert [size] == [a.size_bytes for a in message.attachments]
        assert not message.truncated

    def test_a_multipart_marked_as_attachment_is_one_opaque_attachment(self) -> None:
        inner = multipart([plain("hidden text"), plain("more")], boundary="in", extra="")
        named = inner.replace(
            b"Content-Type:",
            b"Content-Disposition: attachment; filename=bundle\r\nContent-Type:",
            1,
        )
        message = parse_message(multipart([plain("outer text"), named], boundary="out"))
        assert "outer text" == message.text
        (attachment,) = message.attachments
        assert "multipart/mixed; boundary=in" == attachment.content_type
        assert "bundle" == attachment.filename

    def test_a_name_given_whole_and_in_rfc_2231_sections_is_read(self) -> None:
        named = entity([("Content-Type", "text/plain; name*=utf-8''a; name*0=b")], b"x")
        (attachment,) = parse_message(multipart([plain("body"), named])).attachments
        assert ("ab", "text/plain; name=ab") == (attachment.filename, attachment.content_type)

    def test_text_parts_that_are_not_plain_or_html_are_neither_text_nor_attachments(self) -> None:
        message = parse_message(fixture("20"))
        assert "You are invited to the daily stand-up.\n" == message.text
        assert ["invite.ics"] == [a.filename for a in message.attachments]


class TestLimits:
    def test_a_message_over_5_mib_is_truncated(self) -> None:
        raw = fixture("18")
        message = parse_message(raw[: 5 * MIB + 1], rfc822_size=len(raw))
        assert message.truncated
        assert "Yesterday's server log, uncompressed, as requested.\n" == message.text
        assert any("5 MiB" in w and "partial" in w for w in message.warnings)

    def test_the_whole_oversize_message_is_truncated_even_without_a_size(self) -> None:
        assert parse_message(fixture("18")).truncated

    def test_a_server_size_above_the_bytes_read_means_truncated(self) -> None:
        raw = fixture("01")
        assert parse_message(raw, rfc822_size=len(raw) + 1).truncated
        assert not parse_message(raw, rfc822_size=len(raw)).truncated

    @staticmethod
    def nested(levels: int) -> bytes:
        inner = plain("deep text")
        for level in range(levels):
            inner = multipart([inner], boundary=f"level{level}")
        return inner

    def test_twelve_nested_multiparts_are_read(self) -> None:
        message = parse_message(self.nested(12))
        assert ("deep text", False) == (message.text, message.truncated)

    def test_thirteen_nested_multiparts_hit_the_depth_limit(self) -> None:
        message = parse_message(self.nested(13))
        assert ("", True) == (message.text, message.truncated)
        assert any("deeper than 12" in w for w in message.warnings)

    def test_100_parts_are_read(self) -> None:
        message = parse_message(multipart([plain(f"p{i}") for i in range(99)]))
        assert not message.truncated
        assert 99 == len(message.text.split("\n"))

    def test_101_parts_hit_the_part_limit(self) -> None:
        message = parse_message(multipart([plain(f"p{i}") for i in range(100)]))
        assert message.truncated
        assert 99 == len(message.text.split("\n"))
        assert any("more than 100 MIME parts" in w for w in message.warnings)

    def test_a_part_header_block_over_64_kib_is_skipped_and_truncates(self) -> None:
        big = entity([("Content-Type", "text/plain"), ("X-Pad", "a" * (64 * KIB))], b"lost")
        message = parse_message(multipart([plain("kept"), big, plain("after")]))
        assert "kept\nafter" == message.text
        assert message.truncated
        assert any("part header block exceeds 64 KiB" in w for w in message.warnings)

    def test_a_part_header_block_of_exactly_64_kib_is_read(self) -> None:
        prefix = b"Content-Type: text/plain\r\nX-Pad: "
        pad = 64 * KIB - len(prefix) - 2
        part = prefix + b"a" * pad + b"\r\n\r\nfits"
        assert "fits" == parse_message(multipart([part])).text

    def test_text_of_exactly_256_kib_is_complete(self) -> None:
        message = parse_message(plain("a" * TEXT_LIMIT))
        assert (TEXT_LIMIT, False) == (len(message.text), message.truncated)

    def test_text_one_byte_over_256_kib_is_cut_and_truncated(self) -> None:
        message = parse_message(plain("a" * (TEXT_LIMIT + 1)))
        assert (TEXT_LIMIT, True) == (len(message.text), message.truncated)
        assert any("256 KiB" in w for w in message.warnings)

    def test_the_text_cut_lands_on_a_character_boundary(self) -> None:
        message = parse_message(plain("é" * (TEXT_LIMIT // 2 + 1)))
        assert "é" * (TEXT_LIMIT // 2) == message.text

    def test_the_budget_counts_the_joining_newlines(self) -> None:
        message = parse_message(multipart([plain("a" * (TEXT_LIMIT - 2)), plain("bcd")]))
        assert TEXT_LIMIT == len(message.text.encode())
        assert message.text.endswith("\nb")
        assert message.truncated

    def test_a_multipart_container_must_use_an_identity_encoding(self) -> None:
        inner = multipart(
            [plain("inside")], boundary="in", extra="Content-Transfer-Encoding: base64"
        )
        message = parse_message(multipart([plain("outside"), inner], boundary="out"))
        assert ("outside", True) == (message.text, message.truncated)
        assert any("non-identity transfer encoding" in w for w in message.warnings)

    def test_an_unknown_charset_gives_replacements_and_truncates(self) -> None:
        message = parse_message(plain("caf\xe9".encode("latin-1"), charset="x-klingon"))
        assert ("caf\ufffd", True) == (message.text, message.truncated)
        assert any("unknown charset" in w for w in message.warnings)

    def test_an_unknown_transfer_encoding_truncates(self) -> None:
        message = parse_message(multipart([plain("ok"), plain("uu", encoding="x-uuencode")]))
        assert ("ok", True) == (message.text, message.truncated)
        assert any("transfer encoding" in w for w in message.warnings)

    def test_a_multipart_without_delimiters_truncates(self) -> None:
        raw = entity([("Content-Type", 'multipart/mixed; boundary="nowhere"')], b"just text")
        message = parse_message(raw)
        assert ("", True) == (message.text, message.truncated)

    def test_a_missing_closing_delimiter_keeps_the_last_part_but_truncates(self) -> None:
        raw = multipart([plain("one"), plain("two")]).removesuffix(b"--b0--\r\n")
        message = parse_message(raw)
        assert ("one\ntwo", True) == (message.text.rstrip("\n"), message.truncated)

    def test_controls_are_removed_except_newline_and_tab(self) -> None:
        message = parse_message(plain("a\x00b\x07c\td\r\ne\x1b\x7f\x85f\u202eg"))
        assert "abc\td\nefg" == message.text


# --- properties --------------------------------------------------------------------------------

charsets = st.sampled_from(["utf-8", "iso-8859-1", "koi8-r", "shift_jis", "utf-16", "bogus", ""])
encodings = st.sampled_from(["7bit", "8bit", "base64", "quoted-printable", "x-weird", ""])
media = st.sampled_from(["text/plain", "text/html", "image/png", "message/rfc822", "bogus"])


@st.composite
def leaves(draw: st.DrawFn) -> bytes:
    """A random leaf entity, sometimes with a correctly encoded body."""
    body = draw(st.binary(max_size=300))
    encoding = draw(encodings)
    if encoding == "base64" and draw(st.booleans()):
        body = base64.encodebytes(body)
    headers = [("Content-Type", f"{draw(media)}; charset={draw(charsets)}")]
    headers.append(("Content-Transfer-Encoding", encoding))
    if draw(st.booleans()):
        headers.append(("Content-Disposition", draw(st.sampled_from(["attachment", "inline"]))))
    return entity(headers, body)


mime_trees = st.recursive(
    leaves(),
    lambda children: st.builds(
        lambda parts, boundary: multipart(parts, boundary=boundary),
        st.lists(children, min_size=0, max_size=4),
        st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
    ),
    max_leaves=12,
)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A MIME tree, possibly cut short and with random bytes spliced in."""
    raw = draw(mime_trees)
    if draw(st.booleans()):
        raw = raw[: draw(st.integers(0, len(raw)))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(max_size=40)) + raw[at:]
    return raw


class TestNeverRaises:
    @settings(suppress_health_check=[HealthCheck.too_slow])
    @given(st.binary(max_size=3000))
    def test_arbitrary_bytes_parse_to_clean_output(self, raw: bytes) -> None:
        assert_clean(parse_message(raw))

    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(damaged(), st.one_of(st.none(), st.integers(0, 10_000)))
    def test_damaged_mime_trees_parse_to_clean_output(self, raw: bytes, size: int | None) -> None:
        assert_clean(parse_message(raw, rfc822_size=size))


def test_an_html_reference_of_thousands_of_digits_reads_as_a_replacement_character() -> None:
    raw = b"Content-Type: text/html\r\n\r\n<p>&#" + b"9" * 5000 + b";</p>\r\n"
    assert "\ufffd" == parse_message(raw).text
