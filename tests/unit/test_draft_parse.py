"""The structured-draft parser: shapes, all or error."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from providers.mime.compose import build_draft_bytes, compose_draft
from providers.mime.draft.draft import ParsedDraft, parse_draft, read_draft, source_digest
from schemas.args.common import Message
from schemas.compose import Identity
from schemas.errors import SafetyLimit, UnsupportedOperation

IDENTITY = Identity(sender="alice@example.test")
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
HEAD = [
    "From: Alice <alice@example.test>",
    "To: Pat <pat@example.test>",
    "Subject: Plan",
    "Date: Tue, 06 Oct 2026 18:00:00 +0000",
    "Message-ID: <d1@example.test>",
    "MIME-Version: 1.0",
]
PLAIN = ["Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 7bit"]
HTML = ["Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: 7bit"]
EIGHT_BIT = "Content-Transfer-Encoding: 8bit"


def eml(headers: list[str], body: str | bytes = "Hello") -> bytes:
    """A message from header lines and a body, CRLF throughout, ending with CRLF."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return ("\r\n".join(headers) + "\r\n\r\n").encode("utf-8") + data + b"\r\n"


def part(headers: list[str], body: str) -> str:
    return "\r\n".join(headers) + "\r\n\r\n" + body


def multipart(subtype: str, boundary: str, parts: list[str], *, tail: str = "") -> tuple[str, str]:
    """(Content-Type line, body) of a container without preamble or epilogue."""
    body = "".join(f"--{boundary}\r\n{p}\r\n" for p in parts) + f"--{boundary}--" + tail
    return f'Content-Type: multipart/{subtype}; boundary="{boundary}"', body


def alternative(text: str = "Hello", html: str = "<p>Hello</p>") -> tuple[str, str]:
    return multipart("alternative", "alt", [part(PLAIN, text), part(HTML, html)])


def attachment(name: str = "a.bin", data: bytes = b"\x00\xff", ctype: str = "") -> str:
    return part(
        [
            f"Content-Type: {ctype or 'application/octet-stream'}",
            "Content-Transfer-Encoding: base64",
            f'Content-Disposition: attachment; filename="{name}"',
        ],
        base64.b64encode(data).decode("ascii"),
    )


def mixed(body: tuple[str, str] | None = None, *files: str) -> bytes:
    content_type, first = body or alternative()
    inner = part([content_type], first)
    ctype, outer = multipart("mixed", "mix", [inner, *(files or (attachment(),))])
    return eml([*HEAD, ctype], outer)


def composed(**fields: Any) -> bytes:
    message = msgspec.convert(fields, Message)
    built = compose_draft(message, identity=IDENTITY, draft_id="ab" * 16, created_at=NOW)
    return build_draft_bytes(built)


def unsupported(raw: bytes) -> str:
    with pytest.raises(UnsupportedOperation) as caught:
        read_draft(raw)
    message = caught.value.message
    assert message.startswith("the draft is outside the supported structured MIME subset")
    return message


class TestSupportedShapes:
    def test_plain_text_draft(self) -> None:
        draft = read_draft(eml([*HEAD, *PLAIN], "Hello\r\nworld"))
        assert ("Hello\nworld", "", True) == (draft.text, draft.html, draft.has_plain)
        assert "Plan" == draft.subject and "<d1@example.test>" == draft.message_id

    def test_html_only_draft_has_no_plain_part(self) -> None:
        draft = read_draft(eml([*HEAD, *HTML], "<p>Hi</p>"))
        assert ("", "<p>Hi</p>", False) == (draft.text, draft.html, draft.has_plain)

    def test_alternative_draft_keeps_both_bodies(self) -> None:
        ctype, body = alternative("Hi\r\n", "<p>Hi</p>")
        draft = read_draft(eml([*HEAD, ctype], body))
        assert ("Hi\n", "<p>Hi</p>", True) == (draft.text, draft.html, draft.has_plain)

    @pytest.mark.parametrize(
        "body",
        [
            (PLAIN[0], "Text only"),
            (HTML[0], "<p>HTML only</p>"),
            alternative(),
        ],
        ids=["plain", "html", "alternative"],
    )
    def test_mixed_with_each_body_form(self, body: tuple[str, str]) -> None:
        draft = read_draft(mixed(body, attachment("one.bin", b"1"), attachment("two.bin", b"22")))
        assert [("one.bin", b"1"), ("two.bin", b"22")] == [
            (f.filename, f.data) for f in draft.attachments
        ]

    def test_an_explicitly_empty_plain_part_is_kept_as_explicit(self) -> None:
        ctype, body = alternative("", "<p>Only HTML</p>")
        draft = read_draft(eml([*HEAD, ctype], body))
        assert ("", True) == (draft.text, draft.has_plain)

    def test_missing_content_type_means_ascii_plain_text(self) -> None:
        draft = read_draft(eml(HEAD, "Hello"))
        assert ("Hello", True) == (draft.text, draft.has_plain)

    def test_header_names_match_in_any_case_and_fold(self) -> None:
        headers = [
            "FROM: alice@example.test",
            "to: a@example.test,\r\n b@example.test",
            "SUBJECT: two\r\n words",
            "message-id: <x@example.test>",
            "In-Reply-To: <p@example.test>",
            "References: <r@example.test>\r\n\t<p@example.test>",
        ]
        draft = read_draft(eml(headers, "x"))
        assert ["a@example.test", "b@example.test"] == [m.address for m in draft.to]
        assert "two words" == draft.subject
        assert "<p@example.test>" == draft.in_reply_to
        assert ["<r@example.test>", "<p@example.test>"] == draft.references

    def test_rfc2047_subject_and_names_are_decoded(self) -> None:
        headers = [
            "From: =?utf-8?q?Zo=C3=AB?= <alice@example.test>",
            "Subject: =?utf-8?q?Caf=C3=A9?= =?utf-8?b?IMOpdMOp?= ok",
        ]
        draft = read_draft(eml(headers, "x"))
        assert ("Café été ok", "Zoë") == (draft.subject, draft.sender.name)

    def test_transfer_encodings_decode_exactly(self) -> None:
        qp = part(
            [
                "Content-Type: text/plain; charset=utf-8",
                "Content-Transfer-Encoding: quoted-printable",
            ],
            "caf=C3=A9 long=\r\n line",
        )
        html = part(
            ["Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: base64"],
            base64.b64encode("<p>été</p>".encode()).decode(),
        )
        ctype, body = multipart("alternative", "b", [qp, html])
        draft = read_draft(eml([*HEAD, ctype], body))
        assert ("café long line", "<p>été</p>") == (draft.text, draft.html)

    def test_eight_bit_utf8_body(self) -> None:
        raw = eml([*HEAD, PLAIN[0], EIGHT_BIT], "Grüße")
        assert "Grüße" == read_draft(raw).text

    def test_attachment_keeps_type_parameters_and_rfc2231_names(self) -> None:
        name = "Content-Disposition: attachment; filename*=utf-8''na%C3%AFve.txt"
        file = part(
            ['Content-Type: text/plain; charset=iso-8859-1; name="x"', EIGHT_BIT, name], "caf\xe9"
        ).encode("latin-1")
        ctype, outer = multipart("mixed", "m", [part(PLAIN, "Body"), "@FILE@"])
        raw = eml([*HEAD, ctype], outer.encode("ascii").replace(b"@FILE@", file))
        [found] = read_draft(raw).attachments
        assert ("naïve.txt", b"caf\xe9") == (found.filename, found.data)
        assert "text/plain; charset=iso-8859-1; name=x" == found.content_type

    def test_at_most_one_line_break_may_follow_the_closing_boundary(self) -> None:
        ctype, body = alternative()
        raw = eml([*HEAD, ctype], body)
        assert raw.endswith(b"--alt--\r\n")
        assert "Hello" == read_draft(raw).text == read_draft(raw.removesuffix(b"\r\n")).text


class TestRoundTrip:
    def test_a_composed_draft_reads_back_field_for_field(self) -> None:
        files = [
            {"filename": "binary.dat", "content_type": "application/octet-stream",
             "data_base64": "AP+A"},
            {"filename": "naïve plan.txt", "content_type": "text/plain; charset=iso-8859-1",
             "data_base64": base64.b64encode(b"caf\xe9").decode()},
        ]  # fmt: skip
        raw = composed(
            to=['"Pat, Jr." <pat@example.test>', "Zoë <zoe@example.test>"],
            cc=["c@example.test"],
            bcc=["hidden@example.test"],
            subject="Plan für " + "lange " * 30,
            text="Hello\nsecond line\n",
            html="<p>Hello</p>",
            attachments=files,
            in_reply_to="<p@x.test>",
            references=["<r@x.test>", "<p@x.test>"],
        )
        draft = read_draft(raw)
        message = msgspec.to_builtins(draft.message())
        assert {
            "to": ['"Pat, Jr." <pat@example.test>', "=?utf-8?q?Zo=C3=AB?= <zoe@example.test>"],
            "cc": ["<c@example.test>"],
            "bcc": ["<hidden@example.test>"],
            "subject": "Plan für " + "lange " * 30,
            "text": "Hello\nsecond line\n",
            "html": "<p>Hello</p>",
            "attachments": files,
            "in_reply_to": "<p@x.test>",
            "references": ["<r@x.test>", "<p@x.test>"],
        } == {**message, "subject": message["subject"]}
        assert "<abababababababababababababababab@example.test>" == draft.message_id
        assert "alice@example.test" == draft.sender.address

    def test_a_recipientless_empty_draft_reads_back(self) -> None:
        draft = read_draft(composed(to=[], subject="", text=""))
        expected = {"subject": "", "text": ""}
        assert expected == msgspec.to_builtins(draft.message())

    def test_single_text_body_loses_only_its_final_line_break(self) -> None:
        assert "Hello" == read_draft(composed(text="Hello")).text
        assert "Hello\n" == read_draft(composed(text="Hello\n\n")).text

    def test_source_digest_is_sha256_of_the_exact_bytes(self) -> None:
        raw = composed(text="x")
        assert hashlib.sha256(raw).hexdigest() == source_digest(raw)
        assert source_digest(raw) != source_digest(raw + b"\r\n")


class TestUnsupportedHeaders:
    @pytest.mark.parametrize(
        "extra",
        [
            "Reply-To: r@example.test",
            "Sender: s@example.test",
            "X-Custom: 1",
            "Resent-To: r@example.test",
            "Content-ID: <c@example.test>",
            "Content-Language: en",
            "Subject: second",
            "To: again@example.test",
        ],
    )
    def test_a_foreign_or_repeated_outer_field(self, extra: str) -> None:
        assert "header field" in unsupported(eml([*HEAD, extra]))

    def test_the_fixture_drafts_carry_a_custom_header(self) -> None:
        unsupported(eml([*HEAD, "X-Fixture: 44-draft-alternative-attachment"]))

    @pytest.mark.parametrize(
        "raw",
        [
            b"From: alice@example.test\nSubject: x\r\n\r\nbody\r\n",
            b"From: alice@example.test\r\nSubject: x\ry\r\n\r\nbody\r\n",
            b"From: alice@example.test\r\nSubject: \x01\r\n\r\nbody\r\n",
            b"From: alice@example.test\r\nSubject: \x7f\r\n\r\nbody\r\n",
        ],
        ids=["bare-lf", "bare-cr", "control", "del"],
    )
    def test_header_line_endings_and_controls(self, raw: bytes) -> None:
        unsupported(raw)

    def test_a_header_block_without_an_empty_line(self) -> None:
        unsupported(b"From: alice@example.test\r\nSubject: x\r\n")

    def test_a_header_block_over_64_kib(self) -> None:
        long = "To: " + ",\r\n ".join(f"u{i}@example.test" for i in range(4000))
        unsupported(eml([*HEAD[:1], long, *HEAD[2:]]))

    def test_a_line_that_is_not_a_field(self) -> None:
        unsupported(eml([*HEAD, "not a field"]))

    def test_a_leading_continuation_line(self) -> None:
        unsupported(eml([" folded", *HEAD]))

    def test_header_bytes_that_are_not_utf8(self) -> None:
        unsupported(eml(HEAD).replace(b"Plan", b"Pl\xe9n"))

    @pytest.mark.parametrize(
        "sender",
        [
            None,
            "From: a@example.test, b@example.test",
            "From: not an address",
            "From: ",
        ],
    )
    def test_from_must_be_exactly_one_address(self, sender: str | None) -> None:
        headers = [h for h in HEAD if not h.startswith("From")]
        unsupported(eml(headers if sender is None else [sender, *headers]))

    @pytest.mark.parametrize(
        "field",
        [
            "Cc: bad address",
            "Bcc: José <josé@example.test>",
            "To: <a b@example.test>",
            "Date: yesterday",
            "MIME-Version: 2.0",
            "Message-ID: not-an-id",
            "In-Reply-To: <a@x.test> <b@x.test>",
            "References: <ok@x.test> broken",
            "Subject: =?x-unknown?q?abc?=",
            "Subject: =?utf-8?q?bad=ZZ?=",
            "Subject: =?utf-8?b?not*base64?=",
            "Subject: =?utf-8?q?=FF?=",
            "Subject: =?utf-8?q?café?=",
        ],
    )
    def test_field_values_must_be_valid(self, field: str) -> None:
        name = field.split(":", 1)[0].lower()
        kept = [h for h in HEAD if h.split(":", 1)[0].lower() != name]
        unsupported(eml([*kept, field]))


class TestUnsupportedBodies:
    @pytest.mark.parametrize(
        "content_type",
        [
            "text/plain; charset=iso-8859-1",
            "text/plain; charset=utf-8; format=flowed",
            "text/enriched",
            "application/pkcs7-mime; smime-type=enveloped-data",
            "image/png",
        ],
    )
    def test_only_utf8_or_ascii_plain_and_html_bodies(self, content_type: str) -> None:
        unsupported(eml([*HEAD, f"Content-Type: {content_type}"]))

    def test_multipart_related_is_refused(self) -> None:
        ctype, body = multipart("related", "r", [part(HTML, "<img src=cid:x>")])
        unsupported(eml([*HEAD, ctype], body))

    def test_multipart_signed_is_refused(self) -> None:
        ctype, body = multipart("signed", "s", [part(PLAIN, "x"), attachment("sig.p7s")])
        unsupported(eml([*HEAD, ctype], body))

    def test_an_inline_cid_part_is_refused(self) -> None:
        inline = part(
            ["Content-Type: image/png", "Content-ID: <img@x>", "Content-Disposition: inline"],
            "",
        )
        assert "Content-*" in unsupported(mixed(None, inline))

    def test_an_inline_disposition_is_refused(self) -> None:
        inline = part(["Content-Type: image/png", "Content-Disposition: inline"], "")
        unsupported(mixed(None, inline))

    def test_a_preamble_is_refused(self) -> None:
        ctype, body = alternative()
        assert "preamble" in unsupported(eml([*HEAD, ctype], "This is MIME.\r\n" + body))

    def test_an_epilogue_is_refused(self) -> None:
        ctype, body = multipart(
            "alternative", "b", [part(PLAIN, "a"), part(HTML, "<p>a</p>")], tail="\r\nbye\r\n"
        )
        assert "epilogue" in unsupported(eml([*HEAD, ctype], body))

    def test_an_empty_html_part_is_refused(self) -> None:
        ctype, body = alternative("text", "")
        assert "empty HTML" in unsupported(eml([*HEAD, ctype], body))
        assert "empty HTML" in unsupported(eml([*HEAD, *HTML], ""))

    @pytest.mark.parametrize(
        "parts",
        [
            [part(HTML, "<p>a</p>"), part(PLAIN, "a")],
            [part(PLAIN, "a")],
            [part(PLAIN, "a"), part(HTML, "<p>a</p>"), part(PLAIN, "b")],
        ],
        ids=["reversed", "one", "three"],
    )
    def test_alternative_is_exactly_plain_then_html(self, parts: list[str]) -> None:
        ctype, body = multipart("alternative", "b", parts)
        unsupported(eml([*HEAD, ctype], body))

    def test_mixed_needs_at_least_one_attachment(self) -> None:
        ctype, body = multipart("mixed", "m", [part(PLAIN, "a")])
        unsupported(eml([*HEAD, ctype], body))

    def test_mixed_holds_at_most_twenty_attachments(self) -> None:
        files = [attachment(f"f{i}.bin", b"x") for i in range(21)]
        unsupported(mixed(None, *files))
        assert 20 == len(read_draft(mixed(None, *files[:20])).attachments)

    def test_attachments_over_3_mib_in_total(self) -> None:
        big = b"x" * (1024 * 1024 + 1)
        assert "3 MiB" in unsupported(mixed(None, *(attachment(f"{i}.bin", big) for i in range(3))))

    @pytest.mark.parametrize(
        "disposition",
        [
            "",
            "Content-Disposition: attachment",
            'Content-Disposition: attachment; filename=""',
            'Content-Disposition: attachment; filename="a"; size=3',
            "Content-Disposition: attachment; filename*0=a",
        ],
    )
    def test_attachment_dispositions(self, disposition: str) -> None:
        headers = ["Content-Type: application/octet-stream"]
        unsupported(mixed(None, part([*headers, disposition] if disposition else headers, "x")))

    def test_a_multipart_attachment_is_refused(self) -> None:
        nested = part(
            ['Content-Type: multipart/mixed; boundary="n"', 'Content-Disposition: attachment; '
             'filename="x"'],
            "--n\r\n\r\nx\r\n--n--",
        )  # fmt: skip
        unsupported(mixed(None, nested))

    def test_a_body_part_with_a_disposition_is_refused(self) -> None:
        body = part([*PLAIN, "Content-Disposition: inline"], "x")
        ctype, outer = multipart("mixed", "m", [body, attachment()])
        unsupported(eml([*HEAD, ctype], outer))
        unsupported(eml([*HEAD, *PLAIN, "Content-Disposition: inline"]))

    @pytest.mark.parametrize(
        "content_type",
        [
            'multipart/alternative; boundary="' + "b" * 71 + '"',
            'multipart/alternative; boundary="b"; charset=utf-8',
            'multipart/alternative; boundary="b "',
            "multipart/alternative",
        ],
    )
    def test_container_parameters(self, content_type: str) -> None:
        _, body = multipart("alternative", "b", [part(PLAIN, "a"), part(HTML, "<p>a</p>")])
        assert "boundary" in unsupported(eml([*HEAD, f"Content-Type: {content_type}"], body))

    def test_an_encoded_container_is_refused(self) -> None:
        ctype, body = alternative()
        unsupported(eml([*HEAD, ctype, "Content-Transfer-Encoding: base64"], body))

    def test_a_missing_closing_boundary(self) -> None:
        ctype, body = alternative()
        unsupported(eml([*HEAD, ctype], body.removesuffix("--alt--")))

    def test_a_delimiter_line_after_a_bare_lf_inside_a_part_is_refused(self) -> None:
        # The mail reader splits there, so the draft would not read back the same.
        file = part(["Content-Type: text/plain", 'Content-Disposition: attachment; filename="a"'],
                    "line\n--mix\nmore")  # fmt: skip
        assert "boundary line" in unsupported(mixed(None, file))

    def test_a_delimiter_line_with_trailing_text(self) -> None:
        ctype, body = alternative()
        second = "--alt\r\nContent-Type: text/html"
        unsupported(eml([*HEAD, ctype], body.replace(second, second.replace("\r", " \r", 1))))

    @pytest.mark.parametrize(
        ("encoding", "body"),
        [
            ("x-uuencode", "x"),
            ("7bit", "Grüße"),
            ("base64", "SGVsbG8"),
            ("base64", "SGVs bG8="),
            ("quoted-printable", "a=G1"),
            ("quoted-printable", "a=\nb"),
        ],
    )
    def test_transfer_encodings_are_strict(self, encoding: str, body: str) -> None:
        unsupported(eml([*HEAD, PLAIN[0], f"Content-Transfer-Encoding: {encoding}"], body))

    @pytest.mark.parametrize(
        ("content_type", "body"),
        [
            ("text/plain; charset=us-ascii", b"caf\xc3\xa9"),
            ("text/plain", b"caf\xc3\xa9"),
            ("text/plain; charset=utf-8", b"caf\xe9"),
            ("text/plain; charset=utf-8", b"bell\x07"),
        ],
    )
    def test_body_bytes_must_fit_the_charset(self, content_type: str, body: bytes) -> None:
        unsupported(eml([*HEAD, f"Content-Type: {content_type}", EIGHT_BIT], body))

    def test_a_body_over_1_mib(self) -> None:
        unsupported(eml([*HEAD, *PLAIN], "x" * (1024 * 1024 + 1)))


class TestRebuildCheck:
    def test_a_filename_composition_refuses_is_unsupported(self) -> None:
        assert "rebuilt" in unsupported(mixed(None, attachment("dir/evil.sh")))

    def test_a_subject_over_512_bytes_is_unsupported(self) -> None:
        assert "rebuilt" in unsupported(eml([*HEAD[:2], "Subject: " + "s" * 513, *HEAD[3:]]))

    def test_more_than_50_recipients_are_unsupported(self) -> None:
        many = "To: " + ", ".join(f"r{i}@example.test" for i in range(51))
        unsupported(eml([HEAD[0], many, *HEAD[2:]]))

    def test_a_non_canonical_embedded_message_is_unsupported(self) -> None:
        embedded = part(
            [
                "Content-Type: message/rfc822",
                "Content-Transfer-Encoding: 8bit",
                'Content-Disposition: attachment; filename="m.eml"',
            ],
            "no header block\nbare newline",
        )
        unsupported(mixed(None, embedded))

    def test_parse_alone_does_not_check_the_rebuild(self) -> None:
        assert isinstance(parse_draft(mixed(None, attachment("dir/evil.sh"))), ParsedDraft)


class TestLimits:
    def test_a_source_over_5_mib_is_a_safety_limit(self) -> None:
        with pytest.raises(SafetyLimit):
            read_draft(eml([*HEAD, *PLAIN], "x" * (5 * 1024 * 1024)))


class TestTrailingLines:
    def test_two_line_breaks_after_a_top_level_closing_boundary_are_an_epilogue(self) -> None:
        ctype, body = alternative()
        assert "epilogue" in unsupported(eml([*HEAD, ctype], body + "\r\n"))

    def test_a_message_without_a_final_line_break_reads_the_same(self) -> None:
        raw = eml([*HEAD, *PLAIN], "Hello")
        assert read_draft(raw).text == read_draft(raw.removesuffix(b"\r\n")).text
