"""Canonical event encoding and the private payload."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.ledger import (
    Event,
    EventRejected,
    LedgerCorrupt,
    LedgerEntry,
    decode_event,
    decode_payload,
    encode_event,
    encode_payload,
)
from schemas.ledger_events import (
    ANNOTATION_TYPES,
    DATA_CLASSES,
    EVENT_TYPES,
    MAX_INT,
    EventData,
    SmtpAttemptStarted,
)
from support.ledger import PID, SAMPLES, T0, build_events, payload, prepared

CATALOGUE = {
    "prepared": {
        "owner", "digest", "message_id", "transport", "action", "created_ms", "expires_ms",
        "encoded_bytes", "recipient_count", "attachment_sha256", "payload_sha256", "grant",
        "retention_ms", "approval", "allowlist_sha256",
    },
    "approved": {
        "mode", "client_name", "client_version", "protocol", "shown_sha256", "credential_sha256",
    },
    "claimed": {
        "dispatcher_id", "claim_token", "confirmed_digest", "append_sent", "dispatch_deadline_ms",
        "recovery_grace_ms",
    },
    "dispatch_aborted": {"stage", "reason", "network_contacted"},
    "smtp_attempt_started": {"transport", "endpoint", "tls_mode", "auth"},
    "smtp_commit_point": {"wire_bytes", "raw_sha256"},
    "smtp_accepted": {"stage", "reply_code", "enhanced_status"},
    "smtp_rejected": {"stage", "reply_code", "enhanced_status", "network_contacted", "reason"},
    "smtp_outcome_unknown": {"stage", "cause"},
    "sent_filing_started": {"mailbox_role"},
    "sent_filing_succeeded": {"destination_known", "uid_validity", "uid"},
    "sent_filing_failed": {"outcome", "reason"},
    "expired": {"reason"},
    "recovery_classified": {"classification", "stage", "claim_age_ms", "last_lifecycle_type"},
    "rollback_quarantined": {"last_lifecycle_type", "detected_ms", "store_clock", "witness_clock"},
    "approval_requested": {"mode", "shown_sha256", "nonce_sha256"},
    "approval_refused": {"mode", "reason", "nonce_sha256"},
    "confirm_refused": {"reason"},
    "duplicate_confirm": {"observed_status"},
    "dispatch_queued": {"connections", "ahead"},
    "late_outcome_observed": {"outcome", "stage", "reply_code"},
    "operator_resolution": {"outcome", "note", "reprepared_as"},
    "outcome_evidence": {
        "source", "uid_validity", "uid", "graph_id", "sha256", "identical", "copies"
    },
}  # fmt: skip


def sample_event(data: EventData | None = None, **changes: object) -> Event:
    event = build_events([prepared()])[0][0]
    if data is not None:
        event = msgspec.structs.replace(event, type=data.TYPE, data=data)
    return msgspec.structs.replace(event, **changes)


def encoded(**changes: object) -> bytes:
    return encode_event(sample_event(**changes))


def swap(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert old in raw
    return raw.replace(old, new, 1)


class TestCatalogue:
    def test_every_event_type_has_exactly_the_catalogue_fields(self) -> None:
        actual = {t: set(cls.__struct_fields__) for t, cls in DATA_CLASSES.items()}
        assert CATALOGUE == actual

    def test_the_six_annotations_are_the_only_non_lifecycle_events(self) -> None:
        expected = {
            "approval_requested",
            "approval_refused",
            "confirm_refused",
            "duplicate_confirm",
            "dispatch_queued",
            "late_outcome_observed",
        }
        assert expected == set(ANNOTATION_TYPES)
        assert set(CATALOGUE) == set(EVENT_TYPES)

    def test_the_envelope_has_exactly_the_nine_keys(self) -> None:
        keys = set(msgspec.json.decode(encoded()))
        assert {"v", "pid", "seq", "type", "eid", "prev", "at_ms", "actor", "data"} == keys


class TestRoundTrip:
    @pytest.mark.parametrize("event_type", sorted(SAMPLES))
    def test_every_event_type_round_trips_byte_for_byte(self, event_type: str) -> None:
        event = sample_event(SAMPLES[event_type])
        raw = encode_event(event)
        assert event == decode_event(raw)
        assert raw == encode_event(decode_event(raw))

    def test_keys_are_sorted_at_every_level_without_whitespace(self) -> None:
        raw = encoded()
        assert b" " not in raw and b"\n" not in raw
        assert raw.startswith(b'{"actor":"api:test-1","at_ms":')
        assert b'"data":{"action":"new","attachment_sha256":[' in raw

    def test_an_optional_field_is_omitted_not_null(self) -> None:
        from schemas.ledger_events import SentFilingSucceeded

        raw = encode_event(sample_event(SentFilingSucceeded(destination_known=False)))
        assert b'"data":{"destination_known":false}' in raw
        assert b"null" not in raw

    def test_a_str_input_decodes_like_its_bytes(self) -> None:
        raw = encoded()
        assert decode_event(raw) == decode_event(raw.decode("ascii"))


class TestRejection:
    @pytest.mark.parametrize(
        "message_id",
        [
            "<caf\u00e9@example.test>",  # non-ASCII
            '<a"b@example.test>',  # quote
            "<a\\b@example.test>",  # backslash
            "<a\tb@example.test>",  # control
            "<a b@example.test>",  # space inside a Message-ID
            "<ab@example.test> <cd@example.test>",  # two IDs
            "no-brackets@example.test",
            "<@example.test>",
            "<a..b@example.test>",
            "<" + "a" * 990 + "@example.test>",  # > 997 bytes
        ],
    )
    def test_a_value_outside_the_canonical_alphabet_is_refused(self, message_id: str) -> None:
        data = msgspec.structs.replace(prepared(), message_id=message_id)
        with pytest.raises(EventRejected):
            encode_event(sample_event(data))

    def test_a_non_ascii_endpoint_is_refused(self) -> None:
        data = SmtpAttemptStarted(
            transport="smtp", endpoint="sm\u00fctp.example:465", tls_mode="tls", auth="plain"
        )
        with pytest.raises(EventRejected):
            encode_event(sample_event(data))

    @pytest.mark.parametrize("value", [MAX_INT + 1, 2**63, -1])
    def test_an_integer_outside_0_to_2_pow_53_is_refused(self, value: int) -> None:
        with pytest.raises(EventRejected):
            encoded(at_ms=value)

    def test_the_largest_safe_integer_is_accepted(self) -> None:
        assert decode_event(encoded(at_ms=MAX_INT)).at_ms == MAX_INT

    @pytest.mark.parametrize(
        ("old", "new"),
        [
            (b'"seq":1', b'"seq":1.0'),  # float
            (b'"seq":1', b'"seq":1e0'),  # exponent float
            (b'"seq":1', b'"seq":null'),  # null
            (b'"seq":1', b'"seq":true'),  # bool for int
            (b'"seq":1', b'"seq":"1"'),  # string for int
            (b'"v":1', b'"v":2'),  # unknown envelope version
            (b'"type":"prepared"', b'"type":"claimed"'),  # data does not fit the type
            (b'"transport":"smtp"', b'"transport":"smtp","extra":1'),  # unknown field
            (b'"recipient_count":2,', b""),  # missing field
            (b'"actor":"api:test-1"', b'"actor":"api:test\\u002d1"'),  # escaped character
            (b'{"actor"', b'{ "actor"'),  # whitespace
        ],
    )
    def test_non_canonical_or_invalid_bytes_are_refused(self, old: bytes, new: bytes) -> None:
        with pytest.raises(EventRejected):
            decode_event(swap(encoded(), old, new))

    def test_unsorted_keys_are_refused(self) -> None:
        raw = encoded()
        parsed = msgspec.json.decode(raw)
        reordered = msgspec.json.encode({"v": parsed.pop("v"), **parsed})
        assert reordered != raw
        with pytest.raises(EventRejected):
            decode_event(reordered)

    def test_a_duplicated_key_is_refused(self) -> None:
        with pytest.raises(EventRejected):
            decode_event(swap(encoded(), b'"seq":1', b'"seq":1,"seq":1'))

    def test_non_json_and_non_ascii_text_are_refused(self) -> None:
        for bad in (b"", b"not json", b"[]", "{\u00e9}"):
            with pytest.raises(EventRejected):
                decode_event(bad)

    def test_a_type_that_disagrees_with_its_data_is_refused_before_encoding(self) -> None:
        event = msgspec.structs.replace(sample_event(), type="claimed")
        with pytest.raises(EventRejected):
            encode_event(event)

    def test_the_refusal_message_never_quotes_the_value(self) -> None:
        data = msgspec.structs.replace(prepared(), message_id="<secret-canary@x y>")
        with pytest.raises(EventRejected) as caught:
            encode_event(sample_event(data))
        assert "secret-canary" not in str(caught.value)
        assert "$.data.message_id" in str(caught.value)

    def test_a_rejected_event_is_also_a_value_error(self) -> None:
        assert issubclass(EventRejected, ValueError)


class TestProperties:
    @given(st.text(max_size=40))
    def test_any_text_as_a_message_id_either_encodes_canonically_or_is_refused(
        self, text: str
    ) -> None:
        data = msgspec.structs.replace(prepared(), message_id=f"<{text}@example.test>")
        try:
            raw = encode_event(sample_event(data))
        except EventRejected:
            return
        assert raw.isascii()
        assert decode_event(raw).data == data

    @given(st.integers(min_value=-(2**64), max_value=2**64))
    def test_any_integer_either_encodes_or_is_refused(self, number: int) -> None:
        try:
            raw = encoded(at_ms=number)
        except EventRejected:
            assert not 0 <= number <= MAX_INT
            return
        assert 0 <= number <= MAX_INT
        assert decode_event(raw).at_ms == number

    @given(st.binary(max_size=300))
    def test_arbitrary_bytes_never_decode_to_anything_but_an_event_or_a_refusal(
        self, raw: bytes
    ) -> None:
        try:
            event = decode_event(raw)
        except EventRejected:
            return
        assert encode_event(event) == raw


class TestPayload:
    def test_the_payload_round_trips_through_msgpack(self) -> None:
        original = payload(PID, created_ms=T0)
        blob = encode_payload(original)
        assert original == decode_payload(blob)
        assert b'"from"' not in blob and b"from" in blob  # msgpack key named `from`

    def test_unreadable_payload_bytes_are_corrupt(self) -> None:
        with pytest.raises(LedgerCorrupt):
            decode_payload(b"\x00garbage")


class TestEntry:
    @pytest.mark.parametrize(
        ("entry_id", "seq"), [("0-1", 1), ("0-128", 128), ("1-1", 0), ("0-01", 0), ("0-", 0)]
    )
    def test_the_sequence_number_comes_only_from_well_formed_explicit_ids(
        self, entry_id: str, seq: int
    ) -> None:
        entry = LedgerEntry(pid=PID, id=entry_id, e="", h="", t="", eid="", srv_ms=0)
        assert seq == entry.seq
