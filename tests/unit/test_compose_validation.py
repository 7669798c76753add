"""Every composition rule, each with a failing example."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from providers.mime.compose import compose_new
from providers.mime.compose.addresses import parse_source_list, split_list
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity
from schemas.errors import InvalidArguments

PID = "0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
IDENTITY = Identity(sender="alice@example.test", self_addresses=("alice@example.test",))
MIB = 1024 * 1024
CANARY = "canary-7f3a"


def message(**fields: Any) -> Message:
    return msgspec.convert(fields, Message)


def new(**fields: Any) -> ComposedMessage:
    return compose_new(message(**fields), identity=IDENTITY, prepared_id=PID, created_at=NOW)


def refused(**fields: Any) -> str:
    with pytest.raises(InvalidArguments) as caught:
        new(**fields)
    return caught.value.message


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def attachment(
    name: str = "a.txt", data: bytes = b"hello", ctype: str = "text/plain"
) -> dict[str, str]:
    return {"filename": name, "content_type": ctype, "data_base64": b64(data)}


class TestRecipients:
    def test_fifty_one_recipients_are_refused(self) -> None:
        to = [f"r{i}@example.test" for i in range(30)]
        cc = [f"c{i}@example.test" for i in range(21)]
        assert "50" in refused(to=to, cc=cc, text="x")

    def test_fifty_recipients_are_accepted(self) -> None:
        composed = new(to=[f"r{i}@example.test" for i in range(50)], text="x")
        assert 50 == len(composed.recipients)

    def test_the_count_is_taken_before_de_duplication(self) -> None:
        assert "50" in refused(to=["bob@example.test"] * 51, text="x")

    def test_an_entry_over_2048_bytes_is_refused(self) -> None:
        entry = "(" + "c" * 2040 + ") b@example.test"
        assert len(entry.encode()) > 2048
        assert "2048" in refused(to=[entry], text="x")

    @pytest.mark.parametrize(
        "entry",
        [
            f"Bob <bob@example.test>\r\nBcc: {CANARY}@evil.test",
            f"Bob\x07 <{CANARY}@example.test>",
            f"{CANARY}@example.test\x00",
            f"\u0085{CANARY} <b@example.test>",
        ],
    )
    def test_a_control_character_is_refused_without_echoing_the_entry(self, entry: str) -> None:
        text = refused(to=[entry], text="x")
        assert "message.to[0]" in text
        assert CANARY not in text

    def test_a_non_ascii_mailbox_is_refused(self) -> None:
        assert "ASCII" in refused(to=["bøb@example.test"], text="x")

    @pytest.mark.parametrize(
        "entry",
        ['"bob smith"@example.test', "bob@exa mple.test", "bob<x>@example.test", "<>"],
    )
    def test_spaces_and_angle_brackets_in_the_address_are_refused(self, entry: str) -> None:
        refused(to=[entry], text="x")

    @pytest.mark.parametrize(
        "entry", ["bob", "@example.test", "bob@", "Bob <bob>", "a..b@example.test"]
    )
    def test_an_entry_that_is_not_a_mailbox_is_refused(self, entry: str) -> None:
        refused(to=[entry], text="x")

    def test_two_mailboxes_in_one_entry_are_refused(self) -> None:
        assert "one mailbox" in refused(to=["a@example.test, b@example.test"], text="x")

    def test_group_syntax_is_refused(self) -> None:
        refused(to=["Team: a@example.test, b@example.test;"], text="x")

    def test_name_and_address_over_512_bytes_are_refused(self) -> None:
        assert "512" in refused(to=[f"{'N' * 500} <bob@example.test>"], text="x")

    def test_an_encoded_word_that_decodes_to_a_newline_is_refused(self) -> None:
        refused(to=["=?utf-8?q?a=0Ab?= <b@example.test>"], text="x")

    def test_no_recipients_is_refused(self) -> None:
        assert "recipient" in refused(text="x")
        assert "recipient" in refused(to=[], cc=[], bcc=[], text="x")

    def test_bcc_alone_is_enough(self) -> None:
        assert ["b@example.test"] == new(bcc=["b@example.test"], text="x").recipients

    def test_display_names_with_commas_and_quotes_parse_as_one_mailbox(self) -> None:
        composed = new(to=['"Doe, \\"JD\\" John" <jd@example.test>'], text="x")
        assert ["jd@example.test"] == composed.recipients
        assert ['"Doe, \\"JD\\" John" <jd@example.test>'] == composed.to

    def test_a_domain_literal_is_accepted(self) -> None:
        assert ["x@[192.0.2.1]"] == new(to=["x@[192.0.2.1]"], text="x").recipients


class TestDeduplication:
    def test_to_wins_over_cc_and_cc_over_bcc_keeping_the_first_spelling(self) -> None:
        composed = new(
            to=["Bob <Bob@Example.test>", "bob@example.test"],
            cc=["BOB@EXAMPLE.TEST", "Carol <carol@example.test>"],
            bcc=["carol@EXAMPLE.test", "Bob Two <bob@example.test>", "dan@example.test"],
            text="x",
        )
        assert ['"Bob" <Bob@Example.test>'] == composed.to
        assert ['"Carol" <carol@example.test>'] == composed.cc
        assert ["<dan@example.test>"] == composed.bcc
        assert ["Bob@Example.test", "carol@example.test", "dan@example.test"] == (
            composed.recipients
        )

    def test_explicit_self_addresses_are_kept(self) -> None:
        assert ["alice@example.test"] == new(to=["alice@example.test"], text="x").recipients


class TestSubject:
    def test_a_513_byte_subject_is_refused(self) -> None:
        assert "512" in refused(to=["b@example.test"], subject="s" * 513)

    def test_a_512_byte_subject_is_accepted(self) -> None:
        assert "é" * 256 == new(to=["b@example.test"], subject="é" * 256).subject

    def test_multibyte_characters_count_as_bytes(self) -> None:
        refused(to=["b@example.test"], subject="é" * 257)

    @pytest.mark.parametrize(
        "subject", ["Hi\r\nBcc: x@evil.test", "Hi\nthere", "a\rb", "tab\there"]
    )
    def test_cr_lf_and_other_controls_in_the_subject_are_refused(self, subject: str) -> None:
        text = refused(to=["b@example.test"], subject=subject)
        assert "message.subject" in text
        assert "evil" not in text

    def test_an_unpaired_surrogate_is_not_valid_utf8(self) -> None:
        refused(to=["b@example.test"], subject="a\ud800b")


class TestBodies:
    def test_text_over_one_mib_is_refused(self) -> None:
        assert "1 MiB" in refused(to=["b@example.test"], text="x" * (MIB + 1))

    def test_html_over_one_mib_is_refused(self) -> None:
        assert "message.html" in refused(to=["b@example.test"], html="x" * (MIB + 1))

    def test_text_of_exactly_one_mib_is_accepted(self) -> None:
        assert MIB == len(new(to=["b@example.test"], text="x" * MIB).text)

    @pytest.mark.parametrize("body", ["a\x00b", "a\x1bb", "a\x7fb", "a\x85b", "a\x0cb"])
    def test_controls_other_than_cr_lf_tab_are_refused(self, body: str) -> None:
        refused(to=["b@example.test"], text=body)
        refused(to=["b@example.test"], html=body)

    def test_cr_lf_and_tab_are_allowed_and_newlines_are_normalized(self) -> None:
        composed = new(to=["b@example.test"], text="a\r\nb\rc\n\td", html="<p>x</p>\r\n")
        assert "a\nb\nc\n\td" == composed.text
        assert "<p>x</p>\n" == composed.html

    def test_an_encoded_message_over_5_mib_is_refused(self) -> None:
        body = "é" * (MIB // 2)  # 1 MiB of UTF-8 that quoted-printable triples
        assert "5 MiB" in refused(to=["b@example.test"], text=body, html=body)


class TestAttachments:
    def test_21_attachments_are_refused(self) -> None:
        files = [attachment(f"f{i}.txt") for i in range(21)]
        assert "20" in refused(to=["b@example.test"], attachments=files)

    def test_20_attachments_are_accepted(self) -> None:
        files = [attachment(f"f{i}.txt") for i in range(20)]
        assert 20 == len(new(to=["b@example.test"], attachments=files).attachments)

    @pytest.mark.parametrize(
        "name", ["../etc/passwd", "dir/file.txt", "dir\\file.txt", "", "a\x00.txt", "a\nb.txt"]
    )
    def test_bad_filenames_are_refused(self, name: str) -> None:
        text = refused(to=["b@example.test"], attachments=[attachment(name)])
        assert "message.attachments[0].filename" in text

    def test_a_201_byte_filename_is_refused_and_200_accepted(self) -> None:
        refused(to=["b@example.test"], attachments=[attachment("é" * 100 + "a")])
        composed = new(to=["b@example.test"], attachments=[attachment("é" * 100)])
        assert "é" * 100 == composed.attachments[0].filename

    @pytest.mark.parametrize(
        "data", ["aGVsbG8", "aGVs bG8=", "aGVsbG8=\n", "aGVsbG9=", "aGVsbG8==", "*"]
    )
    def test_non_strict_base64_is_refused(self, data: str) -> None:
        file = {"filename": "a.txt", "content_type": "text/plain", "data_base64": data}
        assert "base64" in refused(to=["b@example.test"], attachments=[file])

    def test_decoded_total_over_3_mib_is_refused(self) -> None:
        files = [attachment("a.bin", b"\0" * (2 * MIB)), attachment("b.bin", b"\0" * (MIB + 1))]
        assert "3 MiB" in refused(to=["b@example.test"], attachments=files)

    def test_exactly_3_mib_is_accepted(self) -> None:
        files = [attachment("a.bin", b"\0" * (2 * MIB)), attachment("b.bin", b"\0" * MIB)]
        assert 3 * MIB == sum(
            a.bytes for a in new(to=["b@example.test"], attachments=files).attachments
        )

    def test_base64_longer_than_the_limit_is_refused_before_decoding(self) -> None:
        file = {"filename": "a", "content_type": "a/b", "data_base64": "A" * (4 * MIB + 8)}
        assert "3 MiB" in refused(to=["b@example.test"], attachments=[file])

    @pytest.mark.parametrize(
        "ctype",
        [
            "multipart/mixed",
            "Multipart/Alternative; boundary=x",
            "nonsense",
            "text/",
            "/x",
            "text/plain; =x",
            "text/plain\r\nBcc: x",
        ],
    )
    def test_multipart_and_malformed_content_types_are_refused(self, ctype: str) -> None:
        refused(to=["b@example.test"], attachments=[attachment(ctype=ctype)])

    def test_content_type_parameters_are_preserved_and_normalized(self) -> None:
        composed = new(
            to=["b@example.test"],
            attachments=[attachment(ctype='Text/Plain; Charset="iso-8859-1"; format=flowed')],
        )
        assert (
            "text/plain; charset=iso-8859-1; format=flowed" == composed.attachments[0].content_type
        )

    def test_a_non_canonical_message_rfc822_is_refused(self) -> None:
        eml = b"Subject: x\n\nbare LF body\n"
        text = refused(
            to=["b@example.test"], attachments=[attachment("m.eml", eml, "message/rfc822")]
        )
        assert "application/octet-stream" in text


class TestMessageIds:
    @pytest.mark.parametrize(
        "value",
        [
            "not-an-id",
            "<a b@example.test>",
            "<a@b@example.test>",
            "<.a@example.test>",
            "<a..b@example.test>",
            "<a.@example.test>",
            "<é@example.test>",
            "<a@[x[y]>",
            '<"quoted"@example.test>',
            "<>",
            "<a@example.test>\r\nBcc: x@evil.test",
            "<" + "a" * 994 + "@b>",
        ],
    )
    def test_bad_in_reply_to_values_are_refused(self, value: str) -> None:
        assert "in_reply_to" in refused(to=["b@example.test"], in_reply_to=value)

    def test_ids_are_bracketed_and_case_is_preserved(self) -> None:
        composed = new(
            to=["b@example.test"], in_reply_to=" Abc@Example.TEST ", references=["<R@[192.0.2.1]>"]
        )
        assert "<Abc@Example.TEST>" == composed.in_reply_to
        assert ["<R@[192.0.2.1]>"] == composed.references

    def test_an_id_of_997_bytes_is_valid_but_does_not_fit_an_in_reply_to_line(self) -> None:
        value = "<" + "a" * 993 + "@b>"
        assert "998" in refused(to=["b@example.test"], in_reply_to=value)

    def test_more_than_100_references_are_refused_for_new(self) -> None:
        refs = [f"<r{i}@example.test>" for i in range(101)]
        assert "100" in refused(to=["b@example.test"], references=refs)

    def test_references_over_8_kib_are_refused_for_new(self) -> None:
        refs = [f"<{'r' * 400}{i}@example.test>" for i in range(20)]
        assert "8 KiB" in refused(to=["b@example.test"], references=refs)

    def test_an_invalid_reference_is_refused(self) -> None:
        assert "references[1]" in refused(
            to=["b@example.test"], references=["<a@example.test>", "garbage"]
        )


class TestAddressListSplitting:
    def test_commas_inside_quotes_comments_angles_and_groups_do_not_split(self) -> None:
        value = '"Last, First" <a@b.c> (x, y), <@r,@s:d@e.f>, team: g@h.i, j@k.l;, m@n.o'
        expected = ['"Last, First" <a@b.c> (x, y)', " <@r,@s:d@e.f>", " team: g@h.i, j@k.l;"]
        assert [*expected, " m@n.o"] == split_list(value)

    @pytest.mark.parametrize("value", ['"open <a@b.c>', "a@b.c (open", "Name <a@b.c"])
    def test_an_open_quote_comment_or_angle_address_is_unusable(self, value: str) -> None:
        assert None is split_list(value)

    def test_an_entry_over_2_kib_makes_a_source_list_unusable(self) -> None:
        assert None is parse_source_list("a@b.c, (" + "x" * 2048 + ") d@e.f")
        assert ["a@b.c", "d@e.f"] == [
            m.address for m in parse_source_list("a@b.c, (" + "x" * 2000 + ") d@e.f") or []
        ]

    def test_a_recipient_holding_several_entries_is_refused_before_parsing(self) -> None:
        with pytest.raises(InvalidArguments, match="exactly one mailbox"):
            new(to=["a," * 1023], text="x")
