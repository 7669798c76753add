"""MIME construction: structure, headers, encodings, Bcc, drafts, Graph."""

from __future__ import annotations

import base64
import email
import re
from datetime import UTC, datetime, timedelta, timezone
from email import policy
from email.message import EmailMessage, MIMEPart
from typing import Any

import msgspec
import pytest

from providers.mime.compose import (
    build_draft_bytes,
    compose_draft,
    compose_new,
    for_microsoft_graph,
)
from providers.mime.encoded_words import decode_words
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity
from schemas.digest import approval_digest
from schemas.errors import InvalidArguments

PID = "0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
IDENTITY = Identity(sender="alice@example.test", self_addresses=("alice@example.test",))


def message(**fields: Any) -> Message:
    return msgspec.convert(fields, Message)


def new(**fields: Any) -> ComposedMessage:
    return compose_new(message(**fields), identity=IDENTITY, prepared_id=PID, created_at=NOW)


def parse(raw: bytes) -> EmailMessage:
    parsed = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def content(part: MIMEPart) -> str:
    """Decoded text of a part with the wire's CRLF turned back into LF."""
    text = part.get_content()
    assert isinstance(text, str)
    return text.replace("\r\n", "\n")


def header_names(raw: bytes) -> list[str]:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    return [line.split(":", 1)[0] for line in head.split("\r\n") if not line.startswith(" ")]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class TestStructure:
    def test_text_only_is_one_quoted_printable_utf8_part(self) -> None:
        parsed = parse(new(to=["b@example.test"], text="Grüße").raw)
        assert "text/plain" == parsed.get_content_type()
        assert "utf-8" == parsed.get_content_charset()
        assert "quoted-printable" == parsed["Content-Transfer-Encoding"]
        assert "Grüße\n" == content(parsed)

    def test_text_and_html_make_multipart_alternative_plain_first(self) -> None:
        composed = new(to=["b@example.test"], text="plain", html="<p>rich</p>")
        parsed = parse(composed.raw)
        assert "multipart/alternative" == parsed.get_content_type()
        assert f"=_alternative_{PID}" == parsed.get_boundary()
        parts = list(parsed.iter_parts())
        assert ["text/plain", "text/html"] == [p.get_content_type() for p in parts]
        assert ["plain", "<p>rich</p>"] == [content(p) for p in parts]

    def test_attachments_make_multipart_mixed_with_the_body_first(self) -> None:
        composed = new(
            to=["b@example.test"],
            text="t",
            html="<b>h</b>",
            attachments=[
                {
                    "filename": "r.pdf",
                    "content_type": "application/pdf",
                    "data_base64": b64(b"%PDF"),
                }
            ],
        )
        parsed = parse(composed.raw)
        assert f"=_mixed_{PID}" == parsed.get_boundary()
        body, file = list(parsed.iter_parts())
        assert "multipart/alternative" == body.get_content_type()
        assert "application/pdf" == file.get_content_type()
        assert "r.pdf" == file.get_filename()
        assert b"%PDF" == file.get_content()

    def test_base64_lines_are_76_characters(self) -> None:
        data = bytes(range(256)) * 20
        composed = new(
            to=["b@example.test"],
            attachments=[
                {
                    "filename": "x.bin",
                    "content_type": "application/octet-stream",
                    "data_base64": b64(data),
                }
            ],
        )
        encoded = composed.raw.split(b"Content-Disposition: attachment; filename=x.bin\r\n\r\n")[1]
        lines = encoded.split(b"\r\n\r\n--")[0].split(b"\r\n")
        assert all(76 == len(line) for line in lines[:-1])
        assert 0 < len(lines[-1]) <= 76
        assert data == base64.b64decode(b"".join(lines))

    def test_a_canonical_message_rfc822_part_is_written_raw_as_7bit(self) -> None:
        eml = b"From: a@example.test\r\nSubject: inner\r\n\r\nbody\r\n"
        composed = new(
            to=["b@example.test"],
            attachments=[
                {"filename": "m.eml", "content_type": "message/rfc822", "data_base64": b64(eml)}
            ],
        )
        assert b"Content-Transfer-Encoding: 7bit\r\n" in composed.raw
        assert eml in composed.raw
        inner = list(parse(composed.raw).iter_parts())[1]
        assert "message/rfc822" == inner.get_content_type()

    def test_non_ascii_filenames_use_rfc_2231(self) -> None:
        composed = new(
            to=["b@example.test"],
            attachments=[
                {
                    "filename": "résumé v2.txt",
                    "content_type": "text/plain",
                    "data_base64": b64(b"x"),
                }
            ],
        )
        assert b"filename*=utf-8''r%C3%A9sum%C3%A9%20v2.txt" in composed.raw
        assert "résumé v2.txt" == list(parse(composed.raw).iter_parts())[1].get_filename()

    def test_ascii_filenames_with_specials_are_quoted(self) -> None:
        composed = new(
            to=["b@example.test"],
            attachments=[
                {
                    "filename": 'my "q" file.txt',
                    "content_type": "text/plain",
                    "data_base64": b64(b"x"),
                }
            ],
        )
        assert b'filename="my \\"q\\" file.txt"' in composed.raw
        assert 'my "q" file.txt' == list(parse(composed.raw).iter_parts())[1].get_filename()


class TestHeaders:
    def test_header_order_follows_the_spec(self) -> None:
        composed = new(
            to=["b@example.test"],
            cc=["c@example.test"],
            bcc=["d@example.test"],
            subject="s",
            text="t",
            in_reply_to="<p@example.test>",
            references=["<r@example.test>", "<p@example.test>"],
        )
        assert [
            "From", "To", "Cc", "Subject", "Date", "Message-ID", "MIME-Version", "In-Reply-To",
            "References", "Content-Type", "Content-Transfer-Encoding",
        ] == header_names(composed.raw)  # fmt: skip

    def test_the_sender_is_the_configured_address_in_header_form(self) -> None:
        assert b"From: <alice@example.test>\r\n" in new(to=["b@example.test"]).raw

    def test_date_is_utc_rfc_1123_with_a_numeric_zone(self) -> None:
        later = datetime(2026, 10, 6, 20, 5, 9, tzinfo=timezone(timedelta(hours=2)))
        composed = compose_new(
            message(to=["b@example.test"]), identity=IDENTITY, prepared_id=PID, created_at=later
        )
        assert b"Date: Tue, 06 Oct 2026 18:05:09 +0000\r\n" in composed.raw

    def test_message_id_is_the_prepared_id_at_the_sender_domain(self) -> None:
        composed = new(to=["b@example.test"])
        assert f"<{PID}@example.test>" == composed.message_id
        assert f"Message-ID: <{PID}@example.test>\r\n".encode() in composed.raw

    def test_an_ascii_subject_is_written_verbatim(self) -> None:
        assert (
            b"Subject: Plain (subject) = fine?\r\n"
            in new(to=["b@example.test"], subject="Plain (subject) = fine?").raw
        )

    def test_a_non_ascii_subject_is_rfc_2047_q_encoded(self) -> None:
        composed = new(to=["b@example.test"], subject="Café")
        assert b"Subject: =?utf-8?q?Caf=C3=A9?=\r\n" in composed.raw
        assert "Café" == parse(composed.raw)["Subject"]

    @pytest.mark.parametrize("subject", ["=?utf-8?q?fake?=", " leading space", "trailing "])
    def test_ascii_subjects_a_parser_would_change_are_encoded(self, subject: str) -> None:
        composed = new(to=["b@example.test"], subject=subject)
        assert b"=?utf-8?q?" in composed.raw
        assert subject == parse(composed.raw)["Subject"]

    def test_an_empty_subject_is_still_written(self) -> None:
        assert "Subject" in header_names(new(to=["b@example.test"]).raw)

    def test_display_names_use_quotes_q_or_b_words(self) -> None:
        composed = new(
            to=[
                "Bob Smith <b@example.test>",
                "Zoë <z@example.test>",
                '"Zoë, Jr." <j@example.test>',
            ],
        )
        assert [
            '"Bob Smith" <b@example.test>',
            "=?utf-8?q?Zo=C3=AB?= <z@example.test>",
            "=?utf-8?b?Wm/DqywgSnIu?= <j@example.test>",
        ] == composed.to
        names = [a.display_name for a in parse(composed.raw)["To"].addresses]
        assert ["Bob Smith", "Zoë", "Zoë, Jr."] == names

    def test_a_long_non_ascii_name_splits_into_words_that_decode_exactly(self) -> None:
        name = "Zoë Ångström-Øresund de la Cañada y Müller-Lüdenscheidt"
        (formatted,) = new(to=[f"{name} <z@example.test>"]).to
        words = formatted.removesuffix(" <z@example.test>").split(" ")
        assert len(words) > 1
        assert all(len(word) <= 75 for word in words)
        assert name == decode_words(" ".join(words))

    def test_long_headers_fold_at_spaces_within_78_columns(self) -> None:
        to = [f"Person Number {i} <person{i}@example.test>" for i in range(12)]
        raw = new(to=to).raw
        head = raw.split(b"\r\n\r\n", 1)[0]
        assert all(len(line) <= 78 for line in head.split(b"\r\n"))
        assert 12 == len(parse(raw)["To"].addresses)

    def test_no_branded_header_or_boundary(self) -> None:
        raw = new(to=["b@example.test"], text="t", html="h").raw.lower()
        assert b"x-mailer" not in raw
        assert b"angelos" not in raw


class TestBcc:
    def test_outbound_bytes_never_hold_bcc_while_the_envelope_does(self) -> None:
        composed = new(to=["b@example.test"], bcc=["Secret <hidden@example.test>"], text="t")
        assert b"bcc" not in composed.raw.lower()
        assert b"hidden" not in composed.raw
        assert ["b@example.test", "hidden@example.test"] == composed.recipients
        assert ['"Secret" <hidden@example.test>'] == composed.bcc

    def test_the_digest_binds_the_bcc_recipient(self) -> None:
        composed = new(to=["b@example.test"], bcc=["hidden@example.test"])
        assert composed.digest == approval_digest(
            "alice@example.test", ["b@example.test", "hidden@example.test"], composed.raw
        )


class TestWireInvariants:
    def test_the_message_ends_with_crlf_and_has_no_bare_lf_or_cr(self) -> None:
        raw = new(to=["b@example.test"], text="a\nb\r\nc\rd", html="<p>\n</p>").raw
        assert raw.endswith(b"\r\n")
        assert re.search(rb"(?<!\r)\n", raw) is None
        assert re.search(rb"\r(?!\n)", raw) is None

    def test_quoted_printable_lines_stay_within_76_and_the_text_round_trips(self) -> None:
        text = ("word " * 60 + "\n") * 3 + "=" * 100 + " \n" + "é" * 200
        composed = new(to=["b@example.test"], text=text)
        body = composed.raw.split(b"\r\n\r\n", 1)[1]
        assert max(len(line) for line in body.split(b"\r\n")) <= 76
        assert text + "\n" == content(parse(composed.raw))

    def test_the_same_inputs_give_the_same_bytes(self) -> None:
        fields = {"to": ["b@example.test"], "text": "t", "html": "<p>h</p>"}
        assert new(**fields).raw == new(**fields).raw

    def test_a_different_prepared_id_changes_id_boundary_and_digest(self) -> None:
        fields: dict[str, Any] = {"to": ["b@example.test"], "text": "t", "html": "h"}
        first = new(**fields)
        second = compose_new(
            message(**fields), identity=IDENTITY, prepared_id="f" * 32, created_at=NOW
        )
        assert first.message_id != second.message_id
        assert first.digest != second.digest
        assert b"=_alternative_" + b"f" * 32 in second.raw

    def test_a_bad_prepared_id_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError):
            compose_new(
                message(to=["b@example.test"]), identity=IDENTITY, prepared_id="ABC", created_at=NOW
            )

    def test_a_naive_creation_time_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError):
            compose_new(
                message(to=["b@example.test"]),
                identity=IDENTITY,
                prepared_id=PID,
                created_at=datetime(2026, 1, 1),
            )


class TestDrafts:
    def test_a_draft_may_have_no_recipients(self) -> None:
        composed = compose_draft(
            message(subject="later"), identity=IDENTITY, draft_id=PID, created_at=NOW
        )
        assert [] == composed.recipients
        assert composed.raw == build_draft_bytes(composed)

    def test_draft_bytes_prepend_the_bcc_line(self) -> None:
        composed = compose_draft(
            message(to=["b@example.test"], bcc=["Hidden <h@example.test>", "i@example.test"]),
            identity=IDENTITY,
            draft_id=PID,
            created_at=NOW,
        )
        draft = build_draft_bytes(composed)
        assert draft == b'Bcc: "Hidden" <h@example.test>, <i@example.test>\r\n' + composed.raw
        assert ["h@example.test", "i@example.test"] == [
            a.addr_spec for a in parse(draft)["Bcc"].addresses
        ]

    def test_a_draft_keeps_an_explicitly_empty_plain_part_when_asked(self) -> None:
        kept = compose_draft(
            message(to=["b@example.test"], html="<p>Hi</p>"),
            identity=IDENTITY,
            draft_id=PID,
            created_at=NOW,
            keep_empty_text=True,
        )
        derived = compose_draft(
            message(to=["b@example.test"], html="<p>Hi</p>"),
            identity=IDENTITY,
            draft_id=PID,
            created_at=NOW,
        )
        assert ("", "Hi") == (kept.text, derived.text)

    def test_drafts_still_apply_every_other_rule(self) -> None:
        with pytest.raises(InvalidArguments):
            compose_draft(message(subject="a\nb"), identity=IDENTITY, draft_id=PID, created_at=NOW)


class TestMicrosoftGraph:
    def test_graph_form_carries_bcc_and_a_tagged_digest(self) -> None:
        composed = new(to=["b@example.test"], bcc=["h@example.test"], text="t")
        graph = for_microsoft_graph(composed)
        assert graph.raw == b"Bcc: <h@example.test>\r\n" + composed.raw
        assert "microsoft_graph" == graph.transport
        assert graph.digest == approval_digest(
            "alice@example.test", composed.recipients, graph.raw, transport="microsoft_graph"
        )
        assert graph.digest != approval_digest("alice@example.test", composed.recipients, graph.raw)
        assert len(composed.warnings) + 1 == len(graph.warnings)

    def test_graph_refuses_mime_over_3_mib_minus_1024(self) -> None:
        data = b64(b"\0" * (2 * 1024 * 1024 + 512 * 1024))
        composed = new(
            to=["b@example.test"],
            attachments=[
                {
                    "filename": "a.bin",
                    "content_type": "application/octet-stream",
                    "data_base64": data,
                }
            ],
        )
        with pytest.raises(InvalidArguments):
            for_microsoft_graph(composed)
