"""Argument decoding: one msgspec decode rejects every malformed call."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from schemas import errors
from schemas.args import modify, query
from schemas.discovery import TOOLS_BY_NAME, tool_entries
from service.tool_call import action_name, decode_arguments

REF = {"folder": "INBOX", "uid_validity": 12345, "uid": 678}
DIGEST = "0123456789abcdef" * 4
PID = "0123456789abcdef" * 2


def decode(tool: str, arguments: Any) -> Any:
    return decode_arguments(TOOLS_BY_NAME[tool], arguments)


VALID = [
    ("mail_query", {"action": "capabilities"}),
    ("mail_query", {"action": "folders"}),
    ("mail_query", {"action": "search"}),
    ("mail_query", {"action": "search", "search": {}, "detail": "full"}),
    ("mail_query", {"action": "search", "search": {"unread": None, "flagged": None}}),
    ("mail_query", {"action": "search", "search": {"from": "ann", "since": "2026-01-01"}}),
    ("mail_query", {"action": "triage", "search": {"attention": True, "limit": 100}}),
    ("mail_query", {"action": "conversation", "reference": REF, "search": {"folder": "INBOX"}}),
    ("mail_query", {"action": "read", "reference": REF, "detail": "summary"}),
    ("mail_query", {"action": "read_many", "references": [REF], "max_response_bytes": 0}),
    ("mail_query", {"action": "draft", "reference": REF}),
    ("mail_query", {"action": "attachment", "reference": REF, "index": 1}),
    ("mail_query", {"action": "send_status", "prepared_id": PID}),
    ("mail_create", {"action": "folder", "name": "Projets/Café Été"}),
    ("mail_create", {"action": "copy", "reference": REF, "destination": "Archive"}),
    ("mail_create", {"action": "draft", "message": {}}),
    (
        "mail_create",
        {
            "action": "revise_draft",
            "reference": REF,
            "source_digest": DIGEST,
            "changes": {"to": []},
        },
    ),
    ("mail_modify", {"action": "flags", "reference": REF, "operation": "add", "flags": ["\\seen"]}),
    ("mail_modify", {"action": "rename", "old": "A", "new": "B"}),
    ("mail_modify", {"action": "move", "reference": REF, "destination": "Archive"}),
    ("mail_modify", {"action": "trash", "reference": REF}),
    ("mail_delete_permanently", REF),
    ("mail_prepare", {"action": "new", "message": {"to": ["a@example.test"], "text": "hi"}}),
    ("mail_prepare", {"action": "reply", "reference": REF, "message": {}, "quote_original": False}),
    ("mail_prepare", {"action": "reply_all", "reference": REF, "message": {}}),
    (
        "mail_prepare",
        {"action": "forward", "reference": REF, "message": {}, "original_mode": "eml"},
    ),
    ("mail_prepare", {"action": "draft", "reference": REF, "source_digest": DIGEST}),
    (
        "mail_send_confirmed",
        {"prepared_id": PID, "confirmed_digest": DIGEST, "append_sent": False},
    ),
]

INVALID = [
    ("mail_query", {"action": "folders", "credential": "x"}, "unknown field `credential`"),
    ("mail_query", {"action": "folders", "detail": "full"}, "unknown field `detail`"),
    ("mail_query", {"action": "folders", "detail": ""}, "unknown field `detail`"),
    ("mail_query", {"action": "nope"}, "$.action"),
    ("mail_query", {}, "missing required field `action`"),
    ("mail_query", {"action": "read", "reference": REF, "detail": "brief"}, "$.detail"),
    ("mail_query", {"action": "read"}, "missing required field `reference`"),
    ("mail_query", {"action": "read", "reference": None}, "$.reference"),
    ("mail_query", {"action": "search", "detail": None}, "$.detail"),
    ("mail_query", {"action": "search", "search": {"order": "sideways"}}, "$.search.order"),
    ("mail_query", {"action": "search", "search": {"message_id": None}}, "message_id"),
    ("mail_query", {"action": "search", "search": {"attention": "true"}}, "attention"),
    ("mail_query", {"action": "search", "search": {"limit": 101}}, "limit"),
    ("mail_query", {"action": "search", "search": {"limit": 2.0}}, "limit"),
    ("mail_query", {"action": "search", "search": {"since": "2026-1-1"}}, "since"),
    ("mail_query", {"action": "search", "search": {"since": "2026-02-30"}}, "since"),
    (
        "mail_query",
        {"action": "search", "search": {"since": "2026-02-01", "before": "2026-02-01"}},
        "earlier",
    ),
    ("mail_query", {"action": "search", "search": {"query": "a\r\nb"}}, "CR, LF"),
    ("mail_query", {"action": "search", "search": {"cursor": "x" * 513}}, "cursor"),
    ("mail_query", {"action": "triage", "search": {"attention": False}}, "attention"),
    ("mail_query", {"action": "triage", "search": []}, "$.search"),
    (
        "mail_query",
        {"action": "conversation", "reference": REF, "search": {"attention": True}},
        "unknown field `attention`",
    ),
    (
        "mail_query",
        {"action": "conversation", "reference": REF, "search": {"query": ""}},
        "unknown field `query`",
    ),
    (
        "mail_query",
        {"action": "conversation", "reference": REF, "search": {"folder": "Archive"}},
        "anchor",
    ),
    ("mail_query", {"action": "read_many", "references": []}, "length"),
    ("mail_query", {"action": "read_many", "references": [REF] * 11}, "length"),
    ("mail_query", {"action": "read_many", "references": [REF, REF]}, "distinct"),
    (
        "mail_query",
        {"action": "read_many", "references": [REF], "max_response_bytes": 4095},
        "max_response_bytes",
    ),
    ("mail_query", {"action": "attachment", "reference": REF, "index": 0}, "index"),
    ("mail_query", {"action": "attachment", "reference": REF, "index": 101}, "index"),
    ("mail_query", {"action": "send_status", "prepared_id": "ABC"}, "prepared_id"),
    ("mail_query", {"action": "read", "reference": {**REF, "uid": -1}}, "uid"),
    ("mail_query", {"action": "read", "reference": {**REF, "uid": 4294967296}}, "uid"),
    ("mail_query", {"action": "read", "reference": {**REF, "uid": 0}}, "non-zero"),
    ("mail_query", {"action": "read", "reference": {"folder": "INBOX"}}, "non-zero"),
    ("mail_query", {"action": "read", "reference": {**REF, "folder": ""}}, "folder"),
    ("mail_query", {"action": "read", "reference": {**REF, "folder": "a\u200bb"}}, "control"),
    ("mail_query", {"action": "read", "reference": {**REF, "id": "x"}}, "IMAP reference"),
    ("mail_query", {"action": "read", "reference": {**REF, "provider": "gmail"}}, "provider"),
    ("mail_create", {"action": "folder", "name": "x" * 1025}, "name"),
    ("mail_create", {"action": "copy", "reference": REF, "destination": "INBOX"}, "differ"),
    ("mail_create", {"action": "copy", "reference": REF, "destination": "inbox"}, "differ"),
    (
        "mail_create",
        {
            "action": "revise_draft",
            "reference": REF,
            "source_digest": DIGEST.upper(),
            "changes": {"to": []},
        },
        "source_digest",
    ),
    (
        "mail_create",
        {"action": "revise_draft", "reference": REF, "source_digest": DIGEST, "changes": {}},
        "at least one",
    ),
    (
        "mail_create",
        {
            "action": "revise_draft",
            "reference": REF,
            "source_digest": DIGEST,
            "changes": {"subject": None},
        },
        "subject",
    ),
    ("mail_create", {"action": "draft", "message": {"to": None}}, "$.message.to"),
    ("mail_create", {"action": "draft", "message": {"preserve_empty_text": True}}, "unknown"),
    (
        "mail_modify",
        {"action": "flags", "reference": REF, "operation": "replace", "flags": ["\\Seen"]},
        "operation",
    ),
    ("mail_modify", {"action": "flags", "reference": REF, "operation": "add", "flags": []}, "1-32"),
    (
        "mail_modify",
        {"action": "flags", "reference": REF, "operation": "add", "flags": ["\\Deleted"]},
        "settable",
    ),
    (
        "mail_modify",
        {"action": "flags", "reference": REF, "operation": "add", "flags": ["a b"]},
        "keywords",
    ),
    ("mail_modify", {"action": "trash", "reference": REF, "unchanged_since": 0}, "unchanged_since"),
    ("mail_modify", {"action": "rename", "old": "INBOX", "new": "B"}, "INBOX"),
    ("mail_modify", {"action": "rename", "old": "A", "new": "A"}, "differ"),
    ("mail_delete_permanently", {"action": "x", **REF}, "unknown field `action`"),
    ("mail_delete_permanently", {"reference": REF}, "unknown field `reference`"),
    ("mail_prepare", {"action": "new", "message": {"to": None}}, "$.message.to"),
    (
        "mail_prepare",
        {"action": "draft", "reference": REF, "source_digest": DIGEST, "message": {}},
        "unknown field `message`",
    ),
    (
        "mail_prepare",
        {"action": "reply", "reference": REF, "message": {}, "original_mode": "eml"},
        "original_mode",
    ),
    (
        "mail_prepare",
        {"action": "forward", "reference": REF, "message": {}, "original_mode": "bogus"},
        "original_mode",
    ),
    (
        "mail_prepare",
        {
            "action": "forward",
            "reference": REF,
            "message": {},
            "original_mode": "none",
            "quote_original": False,
        },
        "quote_original",
    ),
    (
        "mail_prepare",
        {"action": "forward", "reference": REF, "message": {}, "attachment_indexes": [1, 1]},
        "unique",
    ),
    (
        "mail_prepare",
        {"action": "forward", "reference": REF, "message": {}, "attachment_indexes": [0]},
        "1-100",
    ),
    ("mail_send_confirmed", {"prepared_id": PID, "confirmed_digest": DIGEST}, "append_sent"),
    (
        "mail_send_confirmed",
        {"prepared_id": PID.upper(), "confirmed_digest": DIGEST, "append_sent": False},
        "prepared_id",
    ),
    (
        "mail_send_confirmed",
        {"prepared_id": PID, "confirmed_digest": "abc", "append_sent": False},
        "confirmed_digest",
    ),
    (
        "mail_send_confirmed",
        {"prepared_id": PID, "confirmed_digest": DIGEST, "append_sent": "no"},
        "append_sent",
    ),
]


class TestDecoding:
    @pytest.mark.parametrize(("tool", "arguments"), VALID)
    def test_valid_call_decodes_to_its_action(self, tool: str, arguments: dict[str, Any]) -> None:
        args = decode(tool, arguments)
        assert arguments.get("action", "") == action_name(args)

    @pytest.mark.parametrize(("tool", "arguments", "hint"), INVALID)
    def test_malformed_call_is_invalid_arguments_naming_the_problem(
        self, tool: str, arguments: dict[str, Any], hint: str
    ) -> None:
        with pytest.raises(errors.InvalidArguments) as caught:
            decode(tool, arguments)
        assert hint in caught.value.message

    def test_arguments_that_are_not_an_object_are_rejected(self) -> None:
        with pytest.raises(errors.InvalidArguments):
            decode("mail_query", ["action", "folders"])

    def test_search_from_is_decoded_under_its_wire_name(self) -> None:
        args = decode("mail_query", {"action": "search", "search": {"from": "ann"}})
        assert isinstance(args, query.SearchMail) and args.search is not None
        assert "ann" == args.search.from_

    def test_flags_are_canonicalized_and_deduplicated(self) -> None:
        args = decode(
            "mail_modify",
            {
                "action": "flags",
                "reference": REF,
                "operation": "add",
                "flags": ["\\seen", "\\SEEN", "$Label", "\\flagged"],
            },
        )
        assert isinstance(args, modify.SetFlags)
        assert ["\\Seen", "$Label", "\\Flagged"] == args.flags

    def test_a_64_bit_modseq_survives_decoding_exactly(self) -> None:
        args = decode(
            "mail_modify",
            {
                "action": "flags",
                "reference": REF,
                "operation": "add",
                "flags": ["\\Seen"],
                "unchanged_since": 18446744073709551615,
            },
        )
        assert isinstance(args, modify.SetFlags)
        assert 18446744073709551615 == args.unchanged_since

    def test_a_modseq_beyond_64_bits_is_rejected(self) -> None:
        with pytest.raises(errors.InvalidArguments):
            decode(
                "mail_modify",
                {
                    "action": "flags",
                    "reference": REF,
                    "operation": "add",
                    "flags": ["\\Seen"],
                    "unchanged_since": 2**64,
                },
            )

    def test_error_detail_is_bounded(self) -> None:
        with pytest.raises(errors.InvalidArguments) as caught:
            decode("mail_query", {"action": "read", "reference": REF, "detail": "x" * 5000})
        assert len(caught.value.message) < 400


def advertised(tool: str, *path: str) -> dict[str, Any]:
    """Return one property's schema from tools/list, following `properties` down `path`."""
    node = next(e for e in tool_entries() if e["name"] == tool)["inputSchema"]
    for name in path:
        node = node["properties"][name]
    assert isinstance(node, dict)
    return node


def decodes(tool: str, arguments: dict[str, Any]) -> bool:
    try:
        decode(tool, arguments)
    except errors.InvalidArguments:
        return False
    return True


class TestSchemaAndDecoderAgree:
    """What tools/list advertises for a limit is exactly what the decoder accepts."""

    @pytest.mark.parametrize(
        ("limit", "admitted"), [(-1, False), (0, True), (1, True), (100, True), (101, False)]
    )
    def test_search_limit(self, limit: int, admitted: bool) -> None:
        schema = advertised("mail_query", "search", "limit")
        assert (admitted, admitted) == (
            Draft202012Validator(schema).is_valid(limit),
            decodes("mail_query", {"action": "search", "search": {"limit": limit}}),
        )

    @pytest.mark.parametrize("key", ["since", "before"])
    @pytest.mark.parametrize(
        ("day", "admitted"),
        [
            ("2026-01-31", True),
            ("2026-1-31", False),
            ("x2026-01-31", False),
            ("2026-01-310", False),
        ],
    )
    def test_search_days(self, key: str, day: str, admitted: bool) -> None:
        schema = advertised("mail_query", "search", key)
        assert (admitted, admitted) == (
            Draft202012Validator(schema).is_valid(day),
            decodes("mail_query", {"action": "search", "search": {key: day}}),
        )

    @pytest.mark.parametrize(
        ("digest", "admitted"),
        [(DIGEST, True), (DIGEST.upper(), True), (DIGEST[1:], False), ("g" * 64, False)],
    )
    def test_confirmed_digest(self, digest: str, admitted: bool) -> None:
        schema = advertised("mail_send_confirmed", "confirmed_digest")
        call = {"prepared_id": PID, "confirmed_digest": digest, "append_sent": False}
        assert (admitted, admitted) == (
            Draft202012Validator(schema).is_valid(digest),
            decodes("mail_send_confirmed", call),
        )

    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("mail_query", {"action": "search", "search": {"since": "2026-01-31\n"}}),
            ("mail_query", {"action": "search", "search": {"before": "2026-01-31\n"}}),
            ("mail_query", {"action": "send_status", "prepared_id": PID + "\n"}),
            (
                "mail_send_confirmed",
                {"prepared_id": PID, "confirmed_digest": DIGEST + "\n", "append_sent": False},
            ),
            ("mail_prepare", {"action": "draft", "reference": REF, "source_digest": DIGEST + "\n"}),
            (
                "mail_create",
                {
                    "action": "revise_draft",
                    "reference": REF,
                    "source_digest": DIGEST + "\n",
                    "changes": {"subject": "x"},
                },
            ),
        ],
    )
    def test_a_trailing_newline_that_pythons_dollar_admits_is_refused(
        self, tool: str, arguments: dict[str, Any]
    ) -> None:
        assert decodes(tool, arguments) is False

    def test_a_day_in_other_digits_is_refused_as_json_schemas_ascii_digit_says(self) -> None:
        arabic_indic = "\u0662\u0660\u0662\u0666-\u0660\u0661-\u0663\u0661"
        call = {"action": "search", "search": {"since": arabic_indic}}
        assert decodes("mail_query", call) is False
