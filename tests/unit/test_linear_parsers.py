"""Every parser of untrusted or caller-supplied input is linear up to its size limit.

Each case times the parser's CPU at a quarter of the limit and at the limit, on the shape that
hurt it (or an older version of it) most, and requires growth well under the ~16x of
quadratic work (support/linear.py). The sizes are the limits the code enforces.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from providers.imap.fetch import parse_fetch
from providers.imap.responses import ImapResponse, tokenize
from providers.imap.wire import FetchReply, WireProtocol
from providers.mime.compose import compose_new, derive_plain_text
from providers.mime.compose.addresses import parse_entry, parse_source_list
from providers.mime.compose.attachments import caller_attachments, is_canonical_message
from providers.mime.compose.encoding import quoted_printable
from providers.mime.draft.draft import read_draft
from providers.mime.encoded_words import decode_words
from providers.mime.header_block import parse_fields, strict_fields
from providers.mime.html_text import html_to_text
from providers.mime.media_types import parse_media_type
from providers.mime.read.attachments import extract_attachment
from providers.mime.read.headers import display_value, parse_addresses
from providers.mime.read.multipart import split_multipart
from providers.mime.read.parse import parse_message
from providers.smtp.wire import dot_stuff
from schemas.args.common import AttachmentIn, Message
from schemas.compose import Identity
from schemas.digest import approval_digest
from schemas.discovery import TOOLS_BY_NAME
from schemas.errors import InvalidArguments
from service.tool_call import decode_arguments
from support import stall_mail as mail
from support.linear import LINEAR_BOUND, growth

KIB = 1024
MIB = 1024 * KIB
HTML_LIMIT = MIB  # message.html, and the HTML a read converts
MESSAGE_LIMIT = 5 * MIB  # the read prefix and an outgoing message
HEADER_LIMIT = 64 * KIB  # a header block / a source header value
ENTRY_LIMIT = 2 * KIB  # one caller recipient
# A third of the 12 MiB a session may read per lease: enough to tell 4x growth from 16x.
RESPONSE_TEXT = 4 * MIB


def fill(unit: str) -> Callable[[int], str]:
    """Build `unit` repeated to about `size` characters."""
    return lambda size: unit * max(1, size // len(unit))


def fill_bytes(unit: bytes) -> Callable[[int], bytes]:
    """Build `unit` repeated to about `size` bytes."""
    return lambda size: unit * max(1, size // len(unit))


def quietly(parse: Callable[[Any], object]) -> Callable[[Any], object]:
    """Run a parser that may refuse its input; refusing is a result too."""

    def run(value: Any) -> object:
        try:
            return parse(value)
        except (InvalidArguments, ValueError):  # a caller's error, or a pure parser's refusal
            return None

    return run


def assert_linear(parse: Callable[[Any], object], build: Callable[[int], Any], limit: int) -> None:
    ratio = growth(parse, build, limit)
    assert ratio < LINEAR_BOUND, f"CPU grew {ratio:.1f}x from limit/4 to the limit"


HTML_SHAPES = {
    "unterminated-tag": fill("<a"),
    "tags-and-text": fill("<p>x"),
    "closing-tags": fill("<b>x</b>"),
    "comments": fill("<!--"),
    "entities": fill("&amp;&#x20ac;&bogus;"),
    "attributes": lambda size: "<a" + ' b="c"' * (size // 6) + ">x",
    "table": fill("<tr><td>a</td><td>b</td></tr>"),
}


class TestHtml:
    @pytest.mark.parametrize("shape", HTML_SHAPES)
    def test_reading_html_is_linear(self, shape: str) -> None:
        assert_linear(html_to_text, HTML_SHAPES[shape], HTML_LIMIT)

    @pytest.mark.parametrize("shape", HTML_SHAPES)
    def test_deriving_plain_text_from_html_is_linear(self, shape: str) -> None:
        assert_linear(quietly(derive_plain_text), HTML_SHAPES[shape], HTML_LIMIT)

    def test_deriving_under_512_open_elements_is_linear(self) -> None:
        assert_linear(
            quietly(derive_plain_text), lambda size: "<div>" * 511 + "<b>x</b>" * (size // 8), MIB
        )


STORED = {
    "deep-nesting": mail.deep_nesting,
    "many-parts": mail.many_parts,
    "header-flood": mail.header_flood,
    "html": lambda size: mail.html_only(b"<p>x", size)(),
    "one-line": mail.long_line,
    "base64-text": mail.base64_text,
    "attachments": mail.attachments,
}


class TestMime:
    @pytest.mark.parametrize("shape", STORED)
    def test_reading_a_message_is_linear(self, shape: str) -> None:
        assert_linear(parse_message, STORED[shape], MESSAGE_LIMIT)

    def test_extracting_an_attachment_is_linear(self) -> None:
        assert_linear(
            lambda raw: extract_attachment(raw, 2, rfc822_size=len(raw)),
            mail.attachments,
            MESSAGE_LIMIT,
        )

    @pytest.mark.parametrize("unit", [b"--bX\r\n", b"--b\r\n", b"\n--b \n"])
    def test_splitting_a_multipart_body_is_linear(self, unit: bytes) -> None:
        assert_linear(
            lambda body: split_multipart(body, 0, len(body), b"b", 100),
            fill_bytes(unit),
            MESSAGE_LIMIT,
        )

    def test_reading_a_draft_is_linear(self) -> None:
        assert_linear(read_draft, lambda size: mail.stored_draft(b"<p>x", size), MESSAGE_LIMIT)

    def test_a_header_block_of_one_letter_fields_is_linear(self) -> None:
        assert_linear(parse_fields, fill_bytes(b"X: v\r\n"), HEADER_LIMIT)

    @pytest.mark.parametrize("unit", [b"X: v\r\n", b" v\r\n"])
    def test_reading_a_strict_header_block_is_linear(self, unit: bytes) -> None:
        def read(size: int) -> bytes:  # under the limit with its first line and empty line
            return b"X: v\r\n" + fill_bytes(unit)(size - 16) + b"\r\n"

        strict = quietly(lambda raw: strict_fields(raw, 0, len(raw), frozenset({"x"})))
        assert_linear(strict, read, HEADER_LIMIT)

    @pytest.mark.parametrize(
        "unit",
        [b"=?utf-8?q?=E2=82=AC?= ", b"=?utf-8?b?4oKs?=", b"=?x?q?", b"=?utf-8?q?" + b"=41" * 20],
    )
    def test_decoding_rfc2047_words_is_linear(self, unit: bytes) -> None:
        assert_linear(lambda value: display_value(value, 4096), fill_bytes(unit), HEADER_LIMIT)

    @pytest.mark.parametrize("unit", ["=?utf-8?q?=E2=82=AC?= ", "=?utf-8?b?4oKs?=", "=?x?q?"])
    def test_decoding_rfc2047_words_strictly_is_linear(self, unit: str) -> None:
        assert_linear(lambda value: decode_words(value, strict=True), fill(unit), HEADER_LIMIT)

    @pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
    @pytest.mark.parametrize("unit", [";", "; a=b", '; a="b;c"', '"', '"\\', "; a*0*=%41"])
    def test_reading_a_content_type_is_linear(self, unit: str, strict: bool) -> None:
        parse = quietly(lambda value: parse_media_type(value, strict=strict))
        assert_linear(parse, lambda size: "text/plain" + fill(unit)(size), HEADER_LIMIT)

    @pytest.mark.parametrize("unit", [b'"a, b" <c@d>, ', b",", b'"\\', b"(", b"<", b"a@b (c) "])
    def test_reading_an_address_list_is_linear(self, unit: bytes) -> None:
        assert_linear(parse_addresses, fill_bytes(unit), HEADER_LIMIT)


IDENTITY = Identity(sender="alice@example.test")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def compose(fields: dict[str, Any]) -> object:
    message = msgspec.convert({"to": ["b@example.test"], **fields}, Message)
    return compose_new(message, identity=IDENTITY, prepared_id="0" * 32, created_at=NOW)


def files(size: int) -> list[AttachmentIn]:
    data = base64.b64encode(bytes(range(256)) * (size // 20 // 256)).decode("ascii")
    return [AttachmentIn(f"f{n}.bin", "application/octet-stream", data) for n in range(20)]


class TestCompose:
    @pytest.mark.parametrize(
        "unit", ['"', ",", "a@b.c, ", '"Last, First" <a@b.c>, ', "<@a,", "(x", '"".']
    )
    def test_parsing_a_source_address_header_is_linear(self, unit: str) -> None:
        assert_linear(parse_source_list, fill(unit), HEADER_LIMIT)

    @pytest.mark.parametrize("unit", ["a,", "a.", '"".', "\\", "(a) ", '"a" '])
    def test_parsing_a_caller_recipient_is_linear(self, unit: str) -> None:
        assert_linear(quietly(lambda entry: parse_entry(entry, "to")), fill(unit), ENTRY_LIMIT)

    @pytest.mark.parametrize("unit", ["\n", "é", "aé", "word ", " \n", "=" * 100 + "\n"])
    def test_quoted_printable_is_linear(self, unit: str) -> None:
        assert_linear(quoted_printable, fill(unit), MIB)

    def test_composing_with_the_largest_files_is_linear(self) -> None:
        assert_linear(lambda size: compose({"text": "x", "attachments": files(size)}), int, 3 * MIB)

    def test_decoding_caller_files_is_linear(self) -> None:
        assert_linear(caller_attachments, files, 3 * MIB)

    def test_the_approval_digest_is_linear(self) -> None:
        assert_linear(lambda raw: approval_digest("a@b.c", ["d@e.f"], raw), bytes, MESSAGE_LIMIT)

    def test_checking_an_embedded_message_is_linear(self) -> None:
        assert_linear(is_canonical_message, lambda size: mail.attachments(size), MESSAGE_LIMIT)

    def test_dot_stuffing_for_smtp_is_linear(self) -> None:
        assert_linear(dot_stuff, fill_bytes(b".\n"), MESSAGE_LIMIT)


def fetch_lines(size: int) -> list[bytes]:
    """A FETCH response of 64 KiB header sections, as many as `size` holds."""
    lines: list[bytes] = []
    for n in range(1, size // HEADER_LIMIT + 1):
        head = b"%d FETCH (UID %d FLAGS (\\Seen) BODY[HEADER.FIELDS (SUBJECT)] {65536}" % (n, n)
        lines += [head, b"S" * HEADER_LIMIT, b")"]
    return lines


def fed(data: bytes) -> Callable[[], object]:
    """Return a run that feeds WireProtocol `data`, one UID FETCH's answer, in 256 KiB reads."""
    chunks = [data[i : i + 256 * KIB] for i in range(0, len(data), 256 * KIB)]

    def run() -> object:
        loop = asyncio.new_event_loop()
        try:
            wire = WireProtocol(loop)
            command = FetchReply("A1", "1:*", "(UID BODY[])", prefix="UID", loop=loop)
            wire.pending_async_commands["FETCH"] = command
            for chunk in chunks:
                wire.data_received(chunk)
            return command
        finally:
            loop.close()

    return run


def feed_literal(size: int) -> Callable[[], object]:
    """Feed a FETCH of one literal of 8-byte lines."""
    literal = b"X-F: v\r\n" * (size // 8)
    return fed(b"* 1 FETCH (UID 1 BODY[] {%d}\r\n" % len(literal) + literal + b")\r\n")


def feed_many_answers(size: int) -> Callable[[], object]:
    """Feed one UID FETCH answered for `size // 64` messages."""
    answer = b"* %d FETCH (UID %d FLAGS (\\Seen $Label) RFC822.SIZE 1234 MODSEQ (7))\r\n"
    return fed(b"".join(answer % (n, n) for n in range(1, size // 64 + 1)))


class TestImapAndJson:
    @pytest.mark.parametrize("unit", [b"() ", b"a ", b'"a\\"" ', b'"' + b"a" * 100 + b'" '])
    def test_tokenizing_response_text_is_linear(self, unit: bytes) -> None:
        assert_linear(
            tokenize,
            lambda size: [b"1 FETCH (X (" + unit * (size // len(unit)) + b"))"],
            RESPONSE_TEXT,
        )

    def test_parsing_a_page_of_summary_sections_is_linear(self) -> None:
        assert_linear(
            lambda lines: parse_fetch(ImapResponse("OK", b"", lines)),
            fetch_lines,
            100 * HEADER_LIMIT,
        )

    def test_receiving_a_literal_of_short_lines_is_linear(self) -> None:
        assert_linear(lambda run: run(), feed_literal, MESSAGE_LIMIT)

    def test_receiving_one_fetch_answered_for_many_messages_is_linear(self) -> None:
        # aioimaplib's own FetchCommand rescans every earlier line per line: quadratic.
        assert_linear(lambda run: run(), feed_many_answers, RESPONSE_TEXT)

    def test_decoding_the_largest_json_arguments_is_linear(self) -> None:
        tool = TOOLS_BY_NAME["mail_prepare"]

        def arguments(size: int) -> dict[str, Any]:
            attached = [msgspec.to_builtins(f) for f in files(size * 3 // 4)]
            message = {"to": ["b@example.test"], "text": "é" * (size // 8), "attachments": attached}
            return {"action": "new", "message": message}

        assert_linear(lambda value: decode_arguments(tool, value), arguments, 6 * MIB)
