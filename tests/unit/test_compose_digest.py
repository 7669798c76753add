"""The approval digest and the preview."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from providers.mime.compose import compose_new, digest_document, expiry, preview
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity, PreparePreview
from schemas.digest import approval_digest

PID = "0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 10, 6, 18, 0, 0, 500000, tzinfo=UTC)
IDENTITY = Identity(sender="alice@example.test", self_addresses=("alice@example.test",))
PREVIEW_KEYS = [
    "prepared_id", "digest", "from", "to", "cc", "bcc", "subject", "text", "html", "warnings",
    "attachments", "message_id", "expires_at", "encoded_bytes", "status", "confirmation",
]  # fmt: skip


def new(prepared_id: str = PID, **fields: Any) -> ComposedMessage:
    return compose_new(
        msgspec.convert(fields, Message), identity=IDENTITY, prepared_id=prepared_id, created_at=NOW
    )


def as_json(value: PreparePreview) -> dict[str, Any]:
    decoded = json.loads(msgspec.json.encode(value))
    assert isinstance(decoded, dict)
    return decoded


class TestDigest:
    def test_the_digest_is_sha256_of_the_from_recipients_raw_json(self) -> None:
        composed = new(
            to=["b@example.test"], cc=["c@example.test"], bcc=["d@example.test"], text="t"
        )
        document = (
            '{"From":"alice@example.test","Recipients":["b@example.test","c@example.test",'
            f'"d@example.test"],"Raw":"{base64.b64encode(composed.raw).decode()}"}}'
        )
        assert re.fullmatch("[0-9a-f]{64}", composed.digest)
        assert hashlib.sha256(document.encode()).hexdigest() == composed.digest

    def test_json_escaping_matches_go_for_ampersand_and_angle_brackets(self) -> None:
        document = digest_document("a&b@example.test", ["<x>@y"], b"")
        assert (
            b'{"From":"a\\u0026b@example.test","Recipients":["\\u003cx\\u003e@y"],"Raw":""}'
            == document
        )

    def test_the_graph_sender_is_prefixed_with_the_transport_and_a_nul(self) -> None:
        document = digest_document("microsoft_graph\x00a@example.test", [], b"")
        assert b'"From":"microsoft_graph\\u0000a@example.test"' in document
        assert hashlib.sha256(document).hexdigest() == approval_digest(
            "a@example.test", [], b"", transport="microsoft_graph"
        )

    def test_changing_one_html_byte_changes_the_digest(self) -> None:
        first = new(to=["b@example.test"], text="t", html="<p>x</p>")
        second = new(to=["b@example.test"], text="t", html="<p>x</p> ")
        assert first.digest != second.digest

    def test_adding_only_a_bcc_recipient_changes_the_digest_but_not_the_bytes(self) -> None:
        first = new(to=["b@example.test"], text="t")
        second = new(to=["b@example.test"], bcc=["hidden@example.test"], text="t")
        assert first.raw == second.raw
        assert first.digest != second.digest

    def test_recipient_order_is_bound(self) -> None:
        raw = new(to=["b@example.test"]).raw
        assert approval_digest("a@x.test", ["b@x.test", "c@x.test"], raw) != approval_digest(
            "a@x.test", ["c@x.test", "b@x.test"], raw
        )

    def test_two_identical_calls_with_fresh_ids_differ_in_id_message_id_and_digest(self) -> None:
        first = new(to=["b@example.test"], text="same")
        second = new("fedcba9876543210fedcba9876543210", to=["b@example.test"], text="same")
        assert (first.prepared_id, first.message_id, first.digest) != (
            second.prepared_id,
            second.message_id,
            second.digest,
        )
        assert first.message_id != second.message_id and first.digest != second.digest


class TestPreview:
    def test_a_new_preview_has_exactly_the_spec_keys_in_order(self) -> None:
        composed = new(to=["b@example.test"], text="t")
        assert PREVIEW_KEYS == list(as_json(preview(composed, expiry(NOW))))

    def test_preview_values_follow_the_spec(self) -> None:
        composed = new(to=["Bob <b@example.test>"], bcc=["h@example.test"], subject="S", text="t")
        shown = as_json(preview(composed, expiry(NOW)))
        assert PID == shown["prepared_id"]
        assert composed.digest == shown["digest"]
        assert "alice@example.test" == shown["from"]
        assert (['"Bob" <b@example.test>'], [], ["<h@example.test>"]) == (
            shown["to"],
            shown["cc"],
            shown["bcc"],
        )
        assert f"<{PID}@example.test>" == shown["message_id"]
        assert "2026-10-06T18:15:00Z" == shown["expires_at"]
        assert len(composed.raw) == shown["encoded_bytes"]
        assert "prepared" == shown["status"]
        assert "mail_send_confirmed" in shown["confirmation"]
        assert "" == shown["html"]

    def test_the_expiry_is_fifteen_minutes_after_creation(self) -> None:
        assert timedelta(minutes=15) == expiry(NOW) - NOW

    def test_empty_warnings_and_attachments_are_arrays_not_null(self) -> None:
        shown = as_json(preview(new(to=["b@example.test"]), expiry(NOW)))
        assert [] == shown["warnings"]
        assert [] == shown["attachments"]

    def test_attachment_summaries_hash_the_decoded_bytes(self) -> None:
        data = b"%PDF-1.4 synthetic"
        composed = new(
            to=["b@example.test"],
            attachments=[
                {
                    "filename": "r.pdf",
                    "content_type": "application/pdf",
                    "data_base64": base64.b64encode(data).decode(),
                }
            ],
        )
        shown = as_json(preview(composed, expiry(NOW)))
        assert [
            {
                "filename": "r.pdf",
                "content_type": "application/pdf",
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        ] == shown["attachments"]

    def test_the_preview_is_never_shortened(self) -> None:
        text = "long line " * 100_000
        shown = as_json(preview(new(to=["b@example.test"], text=text), expiry(NOW)))
        assert text == shown["text"]

    def test_the_preview_never_carries_raw_bytes_or_the_envelope_list(self) -> None:
        shown = as_json(preview(new(to=["b@example.test"]), expiry(NOW)))
        assert not {"raw", "recipients", "envelope_from"} & set(shown)
