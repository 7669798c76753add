"""forward: modes, files, EML, new thread."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import msgspec
import pytest

from providers.mime.compose import (
    ForwardOptions,
    compose_forward,
    forward_options,
    identity_from_config,
    precheck_forward,
    preview,
    select_source_attachments,
)
from providers.mime.compose.attachments import sanitize_filename, strip_outer_bcc
from schemas.args.common import Message
from schemas.compose import ComposedMessage, FetchedAttachment, SourceMessage
from schemas.errors import InvalidArguments, OperationFailed
from schemas.mailbox import Reference
from schemas.messages import AttachmentMeta

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
PID = "0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
IDENTITY = identity_from_config("alice@example.test", "alice", ())
REF = Reference(folder="INBOX", uid_validity=7, uid=42)
MIB = 1024 * 1024


def fixture(prefix: str) -> bytes:
    (path,) = FIXTURES.glob(f"{prefix}-*.eml")
    return path.read_bytes()


def parse(raw: bytes) -> EmailMessage:
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def source_of(raw: bytes, **overrides: Any) -> SourceMessage:
    body = parse(raw).get_body(("plain",))
    text = body.get_content() if body is not None else ""
    fields: dict[str, Any] = {"reference": REF, "raw": raw, "text": text.replace("\r\n", "\n")}
    fields.update(overrides)
    return SourceMessage(**fields)


def pdf_source() -> tuple[SourceMessage, AttachmentMeta, bytes]:
    raw = fixture("15")
    (part,) = list(parse(raw).iter_attachments())
    data = part.get_content()
    assert isinstance(data, bytes)
    meta = AttachmentMeta(
        index=1,
        filename="minutes-2026-02-09.pdf",
        content_type='application/pdf; name="minutes-2026-02-09.pdf"',
        size_bytes=len(data),
    )
    return source_of(raw, attachments=[meta]), meta, data


SYNTHETIC = (
    b"Date: Tue, 06 Oct 2026 17:00:00 +0000\r\n"
    b"From: Ann <ann@x.test>\r\n"
    b"To: alice@example.test\r\n"
    b"Bcc: secret-one@x.test,\r\n"
    b" secret-two@x.test\r\n"
    b"Subject: Fw: FWD: Caf=?utf-8?q?=C3=A9?=\r\n"
    b"Message-ID: <src@x.test>\r\n"
    b"Resent-Bcc: secret-three@x.test\r\n"
    b"Received: from relay.x.test\r\n"
    b"X-Keep: yes\r\n"
    b"\r\n"
    b"Body line\r\n"
    b"Bcc: not-a-header@x.test\r\n"
)


def forward(
    source: SourceMessage,
    options: ForwardOptions | None = None,
    fetched: tuple[FetchedAttachment, ...] = (),
    **fields: Any,
) -> ComposedMessage:
    fields.setdefault("to", ["z@x.test"])
    return compose_forward(
        msgspec.convert(fields, Message),
        source,
        options or forward_options(),
        identity=IDENTITY,
        prepared_id=PID,
        created_at=NOW,
        fetched=fetched,
    )


def file(name: str = "a.txt", data: bytes = b"x") -> dict[str, str]:
    return {
        "filename": name,
        "content_type": "text/plain",
        "data_base64": base64.b64encode(data).decode(),
    }


class TestOptions:
    def test_an_empty_or_absent_mode_means_quoted(self) -> None:
        assert ForwardOptions("quoted", True) == forward_options()
        assert ForwardOptions("quoted", True) == forward_options("")

    def test_quoted_with_quote_original_false_is_none(self) -> None:
        assert ForwardOptions("none", False) == forward_options("quoted", False)

    @pytest.mark.parametrize("mode", ["eml", "none"])
    @pytest.mark.parametrize("quote", [True, False])
    def test_quote_original_with_eml_or_none_is_refused(self, mode: str, quote: bool) -> None:
        with pytest.raises(InvalidArguments, match="quote_original"):
            forward_options(mode, quote)

    def test_an_unknown_mode_is_refused(self) -> None:
        with pytest.raises(InvalidArguments):
            forward_options("inline")

    @pytest.mark.parametrize("indexes", [[0], [101], [1, 1], list(range(1, 22))])
    def test_bad_attachment_indexes_are_refused(self, indexes: list[int]) -> None:
        with pytest.raises(InvalidArguments, match="attachment_indexes"):
            forward_options(attachment_indexes=indexes)

    def test_a_forward_without_recipients_is_refused_before_the_source_is_read(self) -> None:
        with pytest.raises(InvalidArguments, match="recipients"):
            precheck_forward(Message(text="fyi"), forward_options())

    def test_bcc_only_is_enough(self) -> None:
        precheck_forward(Message(bcc=["b@x.test"]), forward_options())

    def test_caller_files_plus_indexes_plus_eml_may_not_exceed_20(self) -> None:
        message = msgspec.convert(
            {"to": ["z@x.test"], "attachments": [file(f"{i}") for i in range(20)]}, Message
        )
        with pytest.raises(InvalidArguments, match="20"):
            precheck_forward(message, forward_options("eml"))
        with pytest.raises(InvalidArguments, match="20"):
            precheck_forward(message, forward_options(attachment_indexes=[1]))

    def test_caller_files_over_3_mib_are_refused_before_the_source_is_read(self) -> None:
        message = msgspec.convert(
            {"to": ["z@x.test"], "attachments": [file("a", b"\0" * (3 * MIB + 1))]}, Message
        )
        with pytest.raises(InvalidArguments, match="3 MiB"):
            precheck_forward(message, forward_options())


class TestQuotedMode:
    def test_the_forwarded_block_follows_the_commentary(self) -> None:
        composed = forward(source_of(fixture("02")), text="FYI")
        assert composed.text.startswith(
            "FYI\n\n---------- Forwarded message ----------\n"
            "From: Hank Rivera <hank@example.test>\n"
            "Date: Tue, 06 Jan 2026 14:03:00 -0500\n"
            "Subject: On-call rota for February\n"
            "To: Alice Martin <alice@example.test>, Bob Okafor <bob@example.test>\n"
            "Cc: Chloe Dubois <chloe@example.org>, ops-archive@example.test\n"
            "\nTeam,\n"
        )

    def test_empty_metadata_lines_are_left_out(self) -> None:
        composed = forward(source_of(fixture("07")), text="FYI")
        assert "Subject:" not in composed.text
        assert "Cc:" not in composed.text

    def test_the_html_alternative_gets_an_escaped_block(self) -> None:
        raw = SYNTHETIC.replace(b"Body line", b"<img src=x onerror=alert(1)>")
        composed = forward(source_of(raw), html="<p>FYI</p>")
        assert composed.html.startswith(
            "<p>FYI</p>\n<hr><p><strong>Forwarded message</strong></p>\n"
            "<div>From: Ann &lt;ann@x.test&gt;<br>\n"
        )
        assert "&lt;img src=x onerror=alert(1)&gt;" in composed.html
        assert "<img" not in composed.html

    def test_a_missing_date_is_left_out_with_a_warning(self) -> None:
        raw = SYNTHETIC.replace(b"Date: Tue, 06 Oct 2026 17:00:00 +0000\r\n", b"")
        composed = forward(source_of(raw), text="FYI")
        assert "Date:" not in composed.text
        assert any("Date" in warning for warning in composed.warnings)


class TestNoneMode:
    @pytest.mark.parametrize("options", [forward_options("none"), forward_options("quoted", False)])
    def test_none_omits_the_source_text(self, options: ForwardOptions) -> None:
        composed = forward(source_of(fixture("02")), options, text="FYI")
        assert "FYI" == composed.text
        assert ("none", False) == (composed.extras.original_mode, composed.extras.quote_original)  # type: ignore[union-attr]

    def test_none_still_carries_caller_and_selected_files(self) -> None:
        source, meta, data = pdf_source()
        composed = forward(
            source,
            forward_options("none", attachment_indexes=[1]),
            (FetchedAttachment(meta=meta, data=data),),
            attachments=[file()],
        )
        assert ["a.txt", "minutes-2026-02-09.pdf"] == [a.filename for a in composed.attachments]


class TestSubjectAndThread:
    @pytest.mark.parametrize(
        ("subject", "expected"),
        [
            ("Fw: FWD: Café", "Fwd: Café"),
            ("Re:", "Fwd: Re:"),
            ("", "Fwd:"),
            ("fwd:fw: x", "Fwd: x"),
        ],
    )
    def test_the_subject_collapses_forward_prefixes(self, subject: str, expected: str) -> None:
        raw = SYNTHETIC.replace(
            b"Subject: Fw: FWD: Caf=?utf-8?q?=C3=A9?=", f"Subject: {subject}".encode()
        )
        assert expected == forward(source_of(raw)).subject

    def test_an_encoded_source_subject_is_decoded_first(self) -> None:
        assert "Fwd: Café" == forward(source_of(SYNTHETIC)).subject

    def test_a_forward_starts_a_new_thread(self) -> None:
        composed = forward(
            source_of(fixture("33")), in_reply_to="<x@x.test>", references=["<x@x.test>"]
        )
        assert ("", []) == (composed.in_reply_to, composed.references)
        assert b"In-Reply-To" not in composed.raw.split(b"\r\n\r\n")[0]
        shown = msgspec.to_builtins(preview(composed, NOW))
        assert ("<q3-budget-4@example.org>", "", []) == (
            shown["source_message_id"],
            shown["in_reply_to"],
            shown["references"],
        )

    @pytest.mark.parametrize(
        "header", [b"", b"Message-ID: <a@x.test> <b@x.test>\r\n", b"Message-ID: garbage\r\n"]
    )
    def test_a_source_without_a_valid_message_id_forwards_with_a_warning(
        self, header: bytes
    ) -> None:
        composed = forward(source_of(SYNTHETIC.replace(b"Message-ID: <src@x.test>\r\n", header)))
        assert "" == composed.extras.source_message_id  # type: ignore[union-attr]
        assert any("Message-ID" in warning for warning in composed.warnings)

    def test_recipients_are_never_derived(self) -> None:
        with pytest.raises(InvalidArguments):
            compose_forward(
                Message(text="fyi"), source_of(fixture("30")), forward_options(),
                identity=IDENTITY, prepared_id=PID, created_at=NOW,
            )  # fmt: skip

    def test_a_truncated_source_fails(self) -> None:
        with pytest.raises(OperationFailed):
            forward(source_of(fixture("30"), truncated=True))


class TestSelectedAttachments:
    def test_a_selected_pdf_is_attached_with_its_hash(self) -> None:
        source, meta, data = pdf_source()
        options = forward_options(attachment_indexes=[1])
        assert [meta] == select_source_attachments(Message(to=["z@x.test"]), source, options)
        composed = forward(source, options, (FetchedAttachment(meta=meta, data=data),))
        shown = msgspec.to_builtins(preview(composed, NOW))
        assert [msgspec.to_builtins(meta)] == shown["included_source_attachments"]
        assert [] == shown["omitted_source_attachments"]
        assert [1] == shown["attachment_indexes"]
        assert hashlib.sha256(data).hexdigest() == shown["attachments"][0]["sha256"]
        assert (
            "application/pdf; name=minutes-2026-02-09.pdf"
            == shown["attachments"][0]["content_type"]
        )
        (sent,) = list(parse(composed.raw).iter_attachments())
        assert data == sent.get_content()

    def test_unselected_attachments_are_reported_as_omitted(self) -> None:
        source, meta, _ = pdf_source()
        composed = forward(source)
        assert [meta] == composed.extras.omitted_source_attachments  # type: ignore[union-attr]
        assert [] == composed.attachments

    def test_the_filename_is_sanitized(self) -> None:
        assert "_ unsafe_name.txt" == sanitize_filename("../ unsafe\\name\x00.txt", 1)
        assert "a_b_c_d_e_f_g_h.txt" == sanitize_filename('a:b*c?d"e<f>g|h.txt', 1)
        assert "evilfdp.exe" == sanitize_filename("evil\u202efdp.exe", 1)
        assert "attachment-3.bin" == sanitize_filename(" ... ", 3)
        assert 200 >= len(sanitize_filename("é" * 150, 1).encode())

    def test_a_sanitized_source_filename_goes_on_the_wire(self) -> None:
        source, _, data = pdf_source()
        odd = AttachmentMeta(
            index=1,
            filename="../ unsafe\\name\x00.txt",
            content_type="text/plain",
            size_bytes=len(data),
        )
        composed = forward(
            source_of(source.raw, attachments=[odd]),
            forward_options(attachment_indexes=[1]),
            (FetchedAttachment(meta=odd, data=data),),
        )
        assert "_ unsafe_name.txt" == composed.attachments[0].filename

    def test_a_missing_index_fails(self) -> None:
        source, _, _ = pdf_source()
        with pytest.raises(OperationFailed, match="no attachment 2"):
            forward(source, forward_options(attachment_indexes=[2]))

    @pytest.mark.parametrize("change", ["size", "metadata", "missing"])
    def test_a_source_attachment_that_changed_fails(self, change: str) -> None:
        source, meta, data = pdf_source()
        fetched: tuple[FetchedAttachment, ...] = {
            "size": (FetchedAttachment(meta=meta, data=data + b"!"),),
            "metadata": (
                FetchedAttachment(
                    meta=msgspec.structs.replace(meta, filename="other.pdf"), data=data
                ),
            ),
            "missing": (),
        }[change]
        with pytest.raises(OperationFailed):
            forward(source, forward_options(attachment_indexes=[1]), fetched)

    def test_a_selected_attachment_over_2_mib_is_refused(self) -> None:
        big = AttachmentMeta(
            index=1,
            filename="big.bin",
            content_type="application/octet-stream",
            size_bytes=2 * MIB + 1,
        )
        with pytest.raises(InvalidArguments, match="2 MiB"):
            forward(
                source_of(fixture("30"), attachments=[big]), forward_options(attachment_indexes=[1])
            )

    def test_the_running_total_with_caller_files_stays_within_3_mib(self) -> None:
        meta = AttachmentMeta(
            index=1, filename="b.bin", content_type="application/octet-stream", size_bytes=2 * MIB
        )
        with pytest.raises(InvalidArguments, match="3 MiB"):
            forward(
                source_of(fixture("30"), attachments=[meta]),
                forward_options(attachment_indexes=[1]),
                attachments=[file("a.bin", b"\0" * (MIB + 1))],
            )

    @pytest.mark.parametrize(
        "ctype", ["multipart/mixed; boundary=x", "message/rfc822", "not a type"]
    )
    def test_unsendable_types_become_octet_stream_with_a_warning(self, ctype: str) -> None:
        data = b"opaque\n"
        meta = AttachmentMeta(index=2, filename="x", content_type=ctype, size_bytes=len(data))
        composed = forward(
            source_of(fixture("30"), attachments=[meta]),
            forward_options(attachment_indexes=[2]),
            (FetchedAttachment(meta=meta, data=data),),
        )
        assert "application/octet-stream" == composed.attachments[0].content_type
        assert any("source attachment 2" in w and "octet-stream" in w for w in composed.warnings)


class TestEmlMode:
    def test_the_original_is_attached_minus_its_outer_bcc_fields(self) -> None:
        composed = forward(source_of(SYNTHETIC), forward_options("eml"), text="see attached")
        expected = SYNTHETIC.replace(
            b"Bcc: secret-one@x.test,\r\n secret-two@x.test\r\n", b""
        ).replace(b"Resent-Bcc: secret-three@x.test\r\n", b"")
        (summary,) = composed.attachments
        assert ("forwarded-message.eml", "message/rfc822") == (
            summary.filename,
            summary.content_type,
        )
        assert hashlib.sha256(expected).hexdigest() == summary.sha256
        assert expected in composed.raw
        assert b"secret-" not in composed.raw
        assert b"X-Keep: yes\r\nReceived" not in composed.raw
        assert b"Received: from relay.x.test\r\nX-Keep: yes\r\n" in composed.raw
        assert b"Bcc: not-a-header@x.test" in composed.raw
        assert "see attached" == composed.text
        assert any("headers" in w and "Bcc" in w for w in composed.warnings)

    def test_strip_outer_bcc_keeps_every_other_byte(self) -> None:
        raw = b"Bcc : a@x\nX: 1\n\tcont\nBCC: b@x\r\n\r\nBcc: body\r\n"
        assert b"X: 1\n\tcont\n\r\nBcc: body\r\n" == strip_outer_bcc(raw)

    def test_an_8bit_original_is_sent_as_octet_stream_with_a_warning(self) -> None:
        composed = forward(source_of(fixture("06")), forward_options("eml"))
        assert "application/octet-stream" == composed.attachments[0].content_type
        assert any("canonical" in w for w in composed.warnings)
        (attached,) = list(parse(composed.raw).iter_attachments())
        assert fixture("06") == attached.get_content()

    def test_the_eml_preview_lists_the_source_inventory_and_omits_nothing(self) -> None:
        source, meta, _ = pdf_source()
        shown = msgspec.to_builtins(preview(forward(source, forward_options("eml")), NOW))
        assert [msgspec.to_builtins(meta)] == shown["source_attachments_in_eml"]
        assert [] == shown["omitted_source_attachments"]
        assert ("eml", False) == (shown["original_mode"], shown["quote_original"])

    def test_selecting_an_index_as_well_includes_a_duplicate_copy(self) -> None:
        source, meta, data = pdf_source()
        composed = forward(
            source,
            forward_options("eml", attachment_indexes=[1]),
            (FetchedAttachment(meta=meta, data=data),),
        )
        assert ["minutes-2026-02-09.pdf", "forwarded-message.eml"] == [
            a.filename for a in composed.attachments
        ]

    def test_an_original_that_does_not_fit_the_budget_is_refused(self) -> None:
        with pytest.raises(InvalidArguments, match="budget"):
            forward(
                source_of(fixture("06")),
                forward_options("eml"),
                attachments=[file("a", b"\0" * (3 * MIB - 10))],
            )

    def test_the_forward_parses_with_the_embedded_message(self) -> None:
        composed = forward(source_of(fixture("30")), forward_options("eml"))
        inner = list(parse(composed.raw).iter_parts())[1]
        assert "message/rfc822" == inner.get_content_type()
        embedded = inner.get_content()
        assert "Q3 budget review" == embedded["Subject"]
