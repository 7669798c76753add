"""reply and reply_all over fixture sources."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import msgspec
import pytest

from providers.mime.compose import compose_reply, identity_from_config, preview
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity, SourceMessage
from schemas.errors import InvalidArguments, OperationFailed
from schemas.mailbox import Reference
from schemas.messages import AttachmentMeta

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
PID = "0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
IDENTITY = identity_from_config("alice@example.test", "alice", ())
REF = Reference(folder="INBOX", uid_validity=7, uid=42)


def fixture(prefix: str) -> bytes:
    (path,) = FIXTURES.glob(f"{prefix}-*.eml")
    return path.read_bytes()


def plain_text(raw: bytes) -> str:
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    body = parsed.get_body(("plain",))
    text = body.get_content() if body is not None else ""
    assert isinstance(text, str)
    return text.replace("\r\n", "\n")


def source_of(raw: bytes, **overrides: Any) -> SourceMessage:
    fields: dict[str, Any] = {"reference": REF, "raw": raw, "text": plain_text(raw)}
    fields.update(overrides)
    return SourceMessage(**fields)


def synthetic(headers: str, body: str = "Original line\n\nSecond paragraph\n") -> SourceMessage:
    head = "\r\n".join(line.strip() for line in headers.strip().splitlines())
    raw = f"{head}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}".encode()
    return SourceMessage(reference=REF, raw=raw, text=body)


BASE = """
From: Ann <ann@x.test>
To: alice@example.test
Subject: Plans
Date: Fri, 02 Jan 2026 03:04:05 +0000
Message-ID: <P@X.test>
"""


def reply(
    source: SourceMessage,
    *,
    reply_all: bool = False,
    quote: bool = True,
    identity: Identity = IDENTITY,
    **fields: Any,
) -> ComposedMessage:
    return compose_reply(
        msgspec.convert(fields, Message),
        source,
        identity=identity,
        prepared_id=PID,
        created_at=NOW,
        reply_all=reply_all,
        quote_original=quote,
    )


class TestRecipients:
    def test_reply_uses_every_reply_to_address(self) -> None:
        composed = reply(synthetic(BASE + "Reply-To: r1@x.test, R Two <r2@x.test>"), text="ok")
        assert ["<r1@x.test>", '"R Two" <r2@x.test>'] == composed.to
        assert [] == composed.cc

    def test_reply_without_reply_to_uses_from(self) -> None:
        composed = reply(source_of(fixture("30")), text="ok")
        assert ['"Bob Okafor" <bob@example.test>'] == composed.to
        assert [] == composed.cc

    def test_reply_to_a_fixture_with_reply_to_goes_to_the_list(self) -> None:
        composed = reply(source_of(fixture("02")), text="ok")
        assert ['"Ops Team" <team-ops@example.test>'] == composed.to

    def test_reply_all_adds_source_to_and_cc_minus_authors_and_self(self) -> None:
        composed = reply(source_of(fixture("02")), reply_all=True, text="ok")
        assert ['"Ops Team" <team-ops@example.test>'] == composed.to
        assert [
            '"Bob Okafor" <bob@example.test>',
            '"Chloe Dubois" <chloe@example.org>',
            "<ops-archive@example.test>",
        ] == composed.cc

    def test_reply_all_on_the_thread_root_excludes_the_owner(self) -> None:
        composed = reply(source_of(fixture("30")), reply_all=True, text="ok")
        assert ["bob@example.test", "chloe@example.org", "dmitri@example.org"] == (
            composed.recipients
        )

    def test_username_and_aliases_count_as_self(self) -> None:
        identity = identity_from_config(
            "owner@example.test", "alice@example.test", ("chloe@example.org",)
        )
        composed = reply(source_of(fixture("30")), reply_all=True, identity=identity, text="ok")
        assert ["bob@example.test", "dmitri@example.org"] == composed.recipients

    def test_a_username_that_is_not_an_address_is_not_self(self) -> None:
        assert ("owner@example.test",) == identity_from_config(
            "owner@example.test", "owner", ()
        ).self_addresses

    def test_derived_cc_is_deduplicated_case_insensitively_keeping_the_first_spelling(self) -> None:
        source = synthetic(
            BASE.replace("To: alice@example.test", "To: Dmitri <DMITRI@x.test>, ALICE@EXAMPLE.TEST")
            + "Cc: dmitri@x.test, Ann Again <ANN@x.test>, eve@x.test"
        )
        composed = reply(source, reply_all=True, text="ok")
        assert ['"Ann" <ann@x.test>'] == composed.to
        assert ['"Dmitri" <DMITRI@x.test>', "<eve@x.test>"] == composed.cc

    def test_explicit_empty_lists_clear_the_fields(self) -> None:
        composed = reply(
            source_of(fixture("30")), reply_all=True, to=[], cc=["z@x.test"], text="ok"
        )
        assert ([], ["<z@x.test>"]) == (composed.to, composed.cc)
        cleared = reply(source_of(fixture("30")), reply_all=True, cc=[], text="ok")
        assert [] == cleared.cc

    def test_clearing_every_recipient_is_refused(self) -> None:
        with pytest.raises(InvalidArguments):
            reply(source_of(fixture("30")), to=[], text="ok")

    def test_explicit_lists_replace_derivation_and_keep_self(self) -> None:
        composed = reply(source_of(fixture("02")), to=["alice@example.test"], text="ok")
        assert ["<alice@example.test>"] == composed.to

    def test_a_reply_to_the_owners_own_message_goes_to_its_recipients(self) -> None:
        source = synthetic(
            BASE.replace("From: Ann <ann@x.test>", "From: Alice <ALICE@example.test>").replace(
                "To: alice@example.test", "To: bob@x.test"
            )
            + "Cc: carol@x.test"
        )
        assert ["<bob@x.test>"] == reply(source, text="ok").to

    def test_the_owners_own_message_to_themselves_falls_back_to_cc(self) -> None:
        source = synthetic(
            BASE.replace("From: Ann <ann@x.test>", "From: alice@example.test") + "Cc: carol@x.test"
        )
        assert ["<carol@x.test>"] == reply(source, text="ok").to

    def test_bcc_is_never_inherited(self) -> None:
        composed = reply(synthetic(BASE + "Bcc: hidden@x.test"), reply_all=True, text="ok")
        assert "hidden@x.test" not in composed.recipients
        assert [] == composed.bcc

    def test_a_malformed_reply_to_fails_a_derived_reply_but_not_an_explicit_one(self) -> None:
        source = synthetic(BASE + "Reply-To: not an address <<>>")
        with pytest.raises(InvalidArguments, match="Reply-To"):
            reply(source, text="ok")
        composed = reply(source, to=["ann@x.test"], text="ok")
        assert ["<ann@x.test>"] == composed.to
        assert any("Reply-To" in warning for warning in composed.warnings)

    def test_a_malformed_cc_fails_a_derived_reply_all_but_not_with_an_empty_cc(self) -> None:
        source = synthetic(BASE + "Cc: broken <<>> list")
        with pytest.raises(InvalidArguments, match="Cc"):
            reply(source, reply_all=True, text="ok")
        assert [] == reply(source, reply_all=True, cc=[], text="ok").cc
        assert ['"Ann" <ann@x.test>'] == reply(source, text="ok").to

    def test_a_source_without_from_or_reply_to_needs_explicit_to(self) -> None:
        source = synthetic(BASE.replace("From: Ann <ann@x.test>\n", ""))
        with pytest.raises(InvalidArguments, match=r"message\.to"):
            reply(source, text="ok")


class TestThreading:
    def test_in_reply_to_is_the_parent_and_references_end_with_it(self) -> None:
        source = synthetic(
            BASE.replace("From: Ann <ann@x.test>", "From: f@x.test")
            + "Reply-To: r@x.test\nReferences: <root@x.test>"
        )
        composed = reply(source, text="Thanks")
        assert "<P@X.test>" == composed.in_reply_to
        assert ["<root@x.test>", "<P@X.test>"] == composed.references
        assert ["<r@x.test>"] == composed.to
        assert b"In-Reply-To: <P@X.test>\r\n" in composed.raw

    def test_the_fixture_thread_is_continued(self) -> None:
        composed = reply(source_of(fixture("33")), text="ok")
        assert [
            "<q3-budget-1@example.test>",
            "<q3-budget-2@example.org>",
            "<q3-budget-3@example.test>",
            "<q3-budget-4@example.org>",
        ] == composed.references

    def test_case_is_significant_and_exact_duplicates_and_the_parent_are_dropped(self) -> None:
        source = synthetic(
            BASE + "References: <Root@Example.COM> <root@Example.COM> <Root@Example.COM> <P@X.test>"
        )
        assert ["<Root@Example.COM>", "<root@Example.COM>", "<P@X.test>"] == (
            reply(source, text="ok").references
        )

    def test_a_300_id_chain_is_trimmed_keeping_the_root_and_the_latest(self) -> None:
        chain = " ".join(f"<id{i}@x.test>" for i in range(300))
        composed = reply(synthetic(BASE + f"References: {chain}"), text="ok")
        assert len(composed.references) <= 100
        assert len(" ".join(composed.references)) <= 8192
        assert "<id0@x.test>" == composed.references[0]
        assert ["<id298@x.test>", "<id299@x.test>", "<P@X.test>"] == composed.references[-3:]
        assert any("shortened" in warning for warning in composed.warnings)

    def test_a_chain_over_8_kib_is_trimmed_under_100_ids(self) -> None:
        chain = " ".join(f"<{'x' * 200}{i}@x.test>" for i in range(60))
        composed = reply(synthetic(BASE + f"References: {chain}"), text="ok")
        assert len(" ".join(composed.references)) <= 8192
        assert composed.references[0].startswith("<" + "x" * 200 + "0@")

    def test_a_short_chain_carries_no_warning(self) -> None:
        assert [] == reply(source_of(fixture("33")), text="ok").warnings

    @pytest.mark.parametrize(
        "header",
        ["", "Message-ID: <a@x.test> <b@x.test>\n", "Message-ID: garbage\n", "Message-ID: <>\n"],
    )
    def test_a_source_without_exactly_one_valid_message_id_fails(self, header: str) -> None:
        source = synthetic(BASE.replace("Message-ID: <P@X.test>\n", header))
        with pytest.raises(OperationFailed, match="standalone"):
            reply(source, text="ok")

    def test_a_message_id_with_a_comment_is_accepted(self) -> None:
        source = synthetic(
            BASE.replace(
                "Message-ID: <P@X.test>", "Message-ID: (parent) <CaseSensitive@Example.COM>"
            )
        )
        assert "<CaseSensitive@Example.COM>" == reply(source, text="ok").in_reply_to

    @pytest.mark.parametrize("value", ["garbage", "", "<ok@x.test> junk", "<bad id@x.test>"])
    def test_garbage_references_fail(self, value: str) -> None:
        with pytest.raises(OperationFailed, match="References"):
            reply(synthetic(BASE + f"References: {value}"), text="ok")

    def test_a_single_in_reply_to_is_the_chain_when_references_is_absent(self) -> None:
        composed = reply(synthetic(BASE + "In-Reply-To: <gp@x.test>"), text="ok")
        assert ["<gp@x.test>", "<P@X.test>"] == composed.references

    def test_an_ambiguous_in_reply_to_is_ignored_with_a_warning(self) -> None:
        composed = reply(synthetic(BASE + "In-Reply-To: <a@x.test> <b@x.test>"), text="ok")
        assert ["<P@X.test>"] == composed.references
        assert any("In-Reply-To" in warning for warning in composed.warnings)

    def test_caller_threading_is_overridden(self) -> None:
        composed = reply(
            synthetic(BASE), text="ok", in_reply_to="<mine@x.test>", references=["<mine@x.test>"]
        )
        assert ("<P@X.test>", ["<P@X.test>"]) == (composed.in_reply_to, composed.references)

    def test_a_duplicated_composition_header_fails(self) -> None:
        with pytest.raises(OperationFailed, match="more than one Subject"):
            reply(synthetic(BASE + "Subject: Again"), text="ok")

    def test_a_truncated_source_fails(self) -> None:
        with pytest.raises(OperationFailed, match="truncated"):
            reply(source_of(fixture("30"), truncated=True), text="ok")


class TestSubject:
    @pytest.mark.parametrize(
        ("source_subject", "expected"),
        [
            ("  re: RE: 日本語", "Re: 日本語"),
            ("Fw: FWD: Café", "Re: Fw: FWD: Café"),
            ("", "Re:"),
            ("Re:", "Re:"),
            ("Re:Re:  tight", "Re: tight"),
            ("Antwort: Hallo", "Re: Antwort: Hallo"),
            ("=?utf-8?q?Caf=C3=A9_=C3=A9t=C3=A9?=", "Re: Café été"),
        ],
    )
    def test_the_subject_is_derived_with_re_collapsed(
        self, source_subject: str, expected: str
    ) -> None:
        source = synthetic(BASE.replace("Subject: Plans", f"Subject: {source_subject}"))
        assert expected == reply(source, text="ok").subject

    def test_a_missing_subject_gives_re(self) -> None:
        assert "Re:" == reply(source_of(fixture("07")), text="ok").subject

    def test_an_explicit_subject_is_used_verbatim(self) -> None:
        assert "  my own " == reply(synthetic(BASE), subject="  my own ", text="ok").subject


class TestQuotation:
    def test_the_quotation_is_on_by_default(self) -> None:
        composed = reply(synthetic(BASE), text="Thanks")
        assert (
            "Thanks\n\nOn Fri, 2 Jan 2026 at 03:04 +0000, Ann <ann@x.test> wrote:\n"
            "> Original line\n>\n> Second paragraph"
        ) == composed.text
        shown = msgspec.to_builtins(preview(composed, NOW))
        assert (True, "quoted") == (shown["quote_original"], shown["original_mode"])

    def test_the_source_date_keeps_its_own_offset(self) -> None:
        composed = reply(source_of(fixture("34")), text="ok")
        assert "On Fri, 3 Apr 2026 at 09:45 +0200, Chloé Dubois <chloe@example.org> wrote:" in (
            composed.text
        )

    def test_a_named_zone_becomes_a_numeric_offset(self) -> None:
        source = synthetic(BASE.replace("+0000", "EST"))
        assert "On Fri, 2 Jan 2026 at 03:04 -0500, Ann" in reply(source, text="ok").text

    def test_quote_original_false_omits_the_quotation(self) -> None:
        composed = reply(synthetic(BASE), quote=False, text="Thanks")
        assert "Thanks" == composed.text
        assert (False, "none") == (composed.extras.quote_original, composed.extras.original_mode)  # type: ignore[union-attr]

    @pytest.mark.parametrize(
        "date",
        [
            "Date: yesterday\n",
            "",
            "Date: Fri, 02 Jan 2026 03:04:05 +2400\n",
            "Date: Fri, 02 Jan 2026 03:04:05 XYZ\n",
        ],
    )
    def test_an_unusable_date_gives_an_author_only_attribution_and_a_warning(
        self, date: str
    ) -> None:
        source = synthetic(BASE.replace("Date: Fri, 02 Jan 2026 03:04:05 +0000\n", date))
        composed = reply(source, text="ok")
        assert "ok\n\nAnn <ann@x.test> wrote:\n> Original line" in composed.text
        assert any("Date" in warning for warning in composed.warnings)

    def test_the_author_falls_back_to_the_sender(self) -> None:
        source = synthetic(BASE.replace("From: Ann <ann@x.test>\n", "") + "Reply-To: r@x.test")
        assert "the sender wrote:" in reply(source, text="ok").text

    def test_an_unparsable_author_is_shown_cleaned(self) -> None:
        source = synthetic(
            BASE.replace("From: Ann <ann@x.test>", "From: Ann   (no address)")
            + "Reply-To: r@x.test"
        )
        assert "Ann (no address) wrote:" in reply(source, text="ok").text

    def test_empty_commentary_starts_at_the_attribution(self) -> None:
        assert reply(synthetic(BASE)).text.startswith("On Fri, 2 Jan 2026")

    def test_an_empty_source_text_is_replaced_by_a_placeholder(self) -> None:
        composed = reply(synthetic(BASE, body=""), text="ok")
        assert composed.text.endswith("> [No decoded text body available]")

    def test_html_gets_an_escaped_quotation_and_source_html_is_never_copied(self) -> None:
        source = synthetic(BASE, body="<script>alert('x')</script> & \"more\"\nline two")
        composed = reply(source, text="Thanks", html="<p>Thanks</p>")
        assert (
            "<p>Thanks</p>\n"
            "<p>On Fri, 2 Jan 2026 at 03:04 +0000, Ann &lt;ann@x.test&gt; wrote:</p>\n"
            '<blockquote type="cite">&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; '
            "&#34;more&#34;<br>\nline two</blockquote>"
        ) == composed.html
        assert "<script" not in composed.html

    def test_the_plain_alternative_does_not_depend_on_html(self) -> None:
        source = synthetic(BASE)
        assert reply(source, text="Hi").text == reply(source, text="Hi", html="<b>Hi</b>").text

    def test_html_only_commentary_is_derived_before_quoting(self) -> None:
        composed = reply(synthetic(BASE), html="<p>Sounds good</p>")
        assert composed.text.startswith("Sounds good\n\nOn Fri")
        assert composed.html.startswith("<p>Sounds good</p>\n<p>On Fri")

    def test_a_source_text_with_controls_cannot_be_quoted(self) -> None:
        source = synthetic(BASE, body="bad \x07 bell")
        with pytest.raises(OperationFailed, match="quote_original"):
            reply(source, text="ok")
        assert "ok" == reply(source, quote=False, text="ok").text

    def test_replies_never_attach_source_files(self) -> None:
        meta = AttachmentMeta(
            index=1, filename="a.pdf", content_type="application/pdf", size_bytes=3
        )
        composed = reply(source_of(fixture("15"), attachments=[meta]), text="ok")
        assert [] == composed.attachments
        shown = msgspec.to_builtins(preview(composed, NOW))
        assert [] == shown["attachment_indexes"]
        assert [] == shown["included_source_attachments"]
        assert [msgspec.to_builtins(meta)] == shown["omitted_source_attachments"]
        assert "source_attachments_in_eml" not in shown

    def test_source_read_warnings_are_carried(self) -> None:
        composed = reply(
            source_of(fixture("30"), warnings=["text was extracted from HTML"]), text="ok"
        )
        assert ["text was extracted from HTML"] == composed.warnings

    def test_the_reply_preview_reports_source_and_threading(self) -> None:
        shown = msgspec.to_builtins(preview(reply(source_of(fixture("31")), text="ok"), NOW))
        assert msgspec.to_builtins(REF) == shown["source"]
        assert "<q3-budget-2@example.org>" == shown["source_message_id"]
        assert "<q3-budget-2@example.org>" == shown["in_reply_to"]
        assert ["<q3-budget-1@example.test>", "<q3-budget-2@example.org>"] == shown["references"]
