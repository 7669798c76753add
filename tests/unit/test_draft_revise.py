"""Revision patches: keep, replace, clear, and the both-alternatives rule."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from providers.mime.compose import build_draft_bytes, compose_draft
from providers.mime.draft.draft import ParsedDraft, read_draft, revised_message
from schemas.args.common import Message
from schemas.compose import Identity
from schemas.errors import InvalidArguments

IDENTITY = Identity(sender="alice@example.test")
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
FILE = {"filename": "a.bin", "content_type": "application/octet-stream", "data_base64": "AP+A"}


def draft_from(*, keep_empty_text: bool = False, **fields: Any) -> ParsedDraft:
    message = msgspec.convert(fields, Message)
    built = compose_draft(
        message,
        identity=IDENTITY,
        draft_id="cd" * 16,
        created_at=NOW,
        keep_empty_text=keep_empty_text,
    )
    return read_draft(build_draft_bytes(built))


def html_only(html: str) -> ParsedDraft:
    """A true HTML-only draft (composition always adds a plain part, other clients may not)."""
    head = "From: alice@example.test\r\nTo: p@example.test\r\nContent-Type: text/html\r\n"
    return read_draft(f"{head}\r\n{html}\r\n".encode("ascii"))


def changes(**fields: Any) -> Message:
    return msgspec.convert(fields, Message)


def revise(source: ParsedDraft, **fields: Any) -> ParsedDraft:
    """Apply a patch, rebuild it as revise_draft does, and read the revision back."""
    message, keep = revised_message(source, changes(**fields))
    built = compose_draft(
        message, identity=IDENTITY, draft_id="ef" * 16, created_at=NOW, keep_empty_text=keep
    )
    return read_draft(build_draft_bytes(built))


BOTH = {"text": "Old text", "html": "<p>Old</p>"}
SOURCES = {
    "text+html": lambda: draft_from(to=["p@example.test"], **BOTH),
    "text": lambda: draft_from(to=["p@example.test"], text="Old text"),
    "html": lambda: html_only("<p>Old</p>"),
    "html+empty-plain": lambda: draft_from(
        to=["p@example.test"], text="", html="<p>Old</p>", keep_empty_text=True
    ),
}


class TestBothAlternativesRule:
    @pytest.mark.parametrize(
        ("source", "patch"),
        [
            ("text+html", {"text": "new"}),
            ("text+html", {"html": "<p>new</p>"}),
            ("text+html", {"html": ""}),
            ("text+html", {"text": ""}),
            ("text", {"html": "<p>new</p>"}),
            ("html+empty-plain", {"html": "<p>new</p>"}),
        ],
    )
    def test_a_one_sided_body_edit_is_rejected(self, source: str, patch: dict[str, str]) -> None:
        with pytest.raises(InvalidArguments) as caught:
            revised_message(SOURCES[source](), changes(**patch))
        assert "changes.text and changes.html" in caught.value.message

    def test_html_only_source_without_plain_part_rejects_a_text_edit(self) -> None:
        source = SOURCES["html"]()
        assert (False, "") == (source.has_plain, source.text)
        with pytest.raises(InvalidArguments):
            revised_message(source, changes(text="new"))

    @pytest.mark.parametrize(
        ("source", "patch", "text", "html"),
        [
            ("text+html", {"text": "new", "html": "<p>new</p>"}, "new", "<p>new</p>"),
            ("text+html", {"text": "new", "html": ""}, "new", ""),
            ("text", {"text": "new"}, "new", ""),
            ("html", {"html": "<p>New</p>"}, "New", "<p>New</p>"),
            ("text+html", {"subject": "new"}, "Old text", "<p>Old</p>"),
            ("text+html", {"to": ["q@example.test"]}, "Old text", "<p>Old</p>"),
        ],
    )
    def test_allowed_edits_rebuild_as_the_table_says(
        self, source: str, patch: dict[str, Any], text: str, html: str
    ) -> None:
        revised = revise(SOURCES[source](), **patch)
        assert (text, html) == (revised.text, revised.html)

    def test_an_explicitly_cleared_plain_part_stays_empty(self) -> None:
        revised = revise(SOURCES["text+html"](), text="", html="<p>x</p>")
        assert ("", "<p>x</p>", True) == (revised.text, revised.html, revised.has_plain)

    def test_an_explicitly_empty_plain_part_survives_a_subject_edit(self) -> None:
        revised = revise(SOURCES["html+empty-plain"](), subject="new")
        assert ("", True) == (revised.text, revised.has_plain)


class TestPatchSemantics:
    def source(self) -> ParsedDraft:
        return draft_from(
            to=["p@example.test"],
            cc=["c@example.test"],
            bcc=["b@example.test"],
            subject="Plan",
            attachments=[FILE],
            in_reply_to="<p@x.test>",
            references=["<r@x.test>"],
            **BOTH,
        )

    def test_omitted_members_keep_the_source(self) -> None:
        revised = revise(self.source(), subject="New")
        before = msgspec.to_builtins(self.source().message())
        assert {**before, "subject": "New"} == msgspec.to_builtins(revised.message())

    def test_empty_values_clear_and_bodies_stay(self) -> None:
        revised = revise(
            self.source(), to=[], cc=[], bcc=[], attachments=[], references=[], in_reply_to=""
        )
        expected = {"subject": "Plan", **BOTH}
        assert expected == msgspec.to_builtins(revised.message())

    def test_attachments_replace_the_whole_list(self) -> None:
        other = {**FILE, "filename": "b.bin", "data_base64": "AQID"}
        revised = revise(self.source(), attachments=[other])
        assert [("b.bin", b"\x01\x02\x03")] == [(f.filename, f.data) for f in revised.attachments]

    def test_a_patch_never_names_the_sender(self) -> None:
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert({"from": "x@example.com"}, Message)
