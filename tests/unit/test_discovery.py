"""Discovery (tools/list), generated from the Structs and pinned by fixtures/tools-list.json."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from schemas.discovery import (
    DISCOVERY_BUDGET_BYTES,
    TOOLS,
    action_usage,
    compact_bytes,
    tool_entries,
)
from schemas.rules import DAY_PATTERN, MAX_SEARCH_LIMIT

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "tools-list.json"
BASELINE_01 = 14_886  # the 0.1.0 baseline, never changed to make growth fit


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    return tool_entries()


def by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in entries}


def expand_refs(node: Any, defs: dict[str, Any] | None = None) -> Any:
    """Replace every $ref by its definition (siblings kept) and drop $defs."""
    if isinstance(node, list):
        return [expand_refs(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if defs is None and "$defs" in node:
        defs = node["$defs"]
    if "$ref" in node:
        assert defs is not None
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return {**expand_refs(target, defs), **siblings}
    return {k: expand_refs(v, defs) for k, v in node.items() if k != "$defs"}


class TestShape:
    def test_six_tools_sorted_by_name(self, entries: list[dict[str, Any]]) -> None:
        assert [
            "mail_create",
            "mail_delete_permanently",
            "mail_modify",
            "mail_prepare",
            "mail_query",
            "mail_send_confirmed",
        ] == [e["name"] for e in entries]

    def test_each_tool_has_exactly_the_six_top_level_keys(
        self, entries: list[dict[str, Any]]
    ) -> None:
        for entry in entries:
            assert {
                "_meta",
                "annotations",
                "description",
                "inputSchema",
                "name",
                "securitySchemes",
            } == set(entry)

    def test_annotations_match_the_risk_classes(self, entries: list[dict[str, Any]]) -> None:
        expected = {
            "mail_query": (True, False, False),
            "mail_create": (False, False, False),
            "mail_modify": (False, True, False),
            "mail_delete_permanently": (False, True, False),
            "mail_prepare": (False, False, False),
            "mail_send_confirmed": (False, True, True),
        }
        for name, entry in by_name(entries).items():
            hints = entry["annotations"]
            assert set(hints) == {
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
            }
            assert expected[name] == (
                hints["readOnlyHint"],
                hints["destructiveHint"],
                hints["openWorldHint"],
            )
            assert hints["idempotentHint"] is False

    def test_security_schemes_are_mirrored_with_the_tool_scopes(
        self, entries: list[dict[str, Any]]
    ) -> None:
        scopes = {
            "mail_query": ["mail.read"],
            "mail_create": ["mail.read", "mail.write"],
            "mail_modify": ["mail.read", "mail.write"],
            "mail_delete_permanently": ["mail.read", "mail.write"],
            "mail_prepare": ["mail.read", "mail.send"],
            "mail_send_confirmed": ["mail.read", "mail.send"],
        }
        for name, entry in by_name(entries).items():
            assert entry["securitySchemes"] == entry["_meta"]["securitySchemes"]
            assert [{"scopes": scopes[name], "type": "oauth2"}] == entry["securitySchemes"]

    def test_action_enums_list_all_25_operations(self, entries: list[dict[str, Any]]) -> None:
        tools = by_name(entries)
        enums = {
            name: tools[name]["inputSchema"]["properties"]["action"]["enum"]
            for name in ("mail_query", "mail_create", "mail_modify", "mail_prepare")
        }
        assert enums == {
            "mail_query": [
                "attachment",
                "capabilities",
                "conversation",
                "draft",
                "folders",
                "read",
                "read_many",
                "search",
                "send_status",
                "triage",
            ],
            "mail_create": ["copy", "draft", "folder", "revise_draft"],
            "mail_modify": ["flags", "move", "rename", "trash"],
            "mail_prepare": ["draft", "forward", "new", "reply", "reply_all"],
        }
        assert 25 == sum(len(v) for v in enums.values()) + 2  # + the two direct tools

    def test_required_keys_and_closed_objects(self, entries: list[dict[str, Any]]) -> None:
        tools = by_name(entries)
        for entry in entries:
            assert entry["inputSchema"]["type"] == "object"
            assert entry["inputSchema"]["additionalProperties"] is False
        for name in ("mail_query", "mail_create", "mail_modify", "mail_prepare"):
            assert ["action"] == tools[name]["inputSchema"]["required"]
        assert ["folder"] == tools["mail_delete_permanently"]["inputSchema"]["required"]
        assert ["prepared_id", "confirmed_digest", "append_sent"] == tools["mail_send_confirmed"][
            "inputSchema"
        ]["required"]

    def test_patterns_bounds_and_reference_limits(self, entries: list[dict[str, Any]]) -> None:
        tools = by_name(entries)
        query = tools["mail_query"]["inputSchema"]
        assert "^[0-9a-f]{32}$" == query["properties"]["prepared_id"]["pattern"]
        assert (1, 10) == (
            query["properties"]["references"]["minItems"],
            query["properties"]["references"]["maxItems"],
        )
        ref = query["$defs"]["ref"]
        assert 4294967295 == ref["properties"]["uid"]["maximum"]
        assert 4294967295 == ref["properties"]["uid_validity"]["maximum"]
        for name in ("mail_create", "mail_prepare"):
            props = tools[name]["inputSchema"]["properties"]
            assert "^[0-9a-f]{64}$" == props["source_digest"]["pattern"]
        search = query["properties"]["search"]["properties"]
        assert (0, MAX_SEARCH_LIMIT) == (search["limit"]["minimum"], search["limit"]["maximum"])
        assert [DAY_PATTERN, DAY_PATTERN] == [search[k]["pattern"] for k in ("since", "before")]
        confirmed = tools["mail_send_confirmed"]["inputSchema"]["properties"]["confirmed_digest"]
        assert "^[0-9a-fA-F]{64}$" == confirmed["pattern"]

    def test_every_type_is_one_name_without_unions(self, entries: list[dict[str, Any]]) -> None:
        unions: list[str] = []

        def walk(node: Any, path: str) -> None:
            if isinstance(node, dict):
                kind = node.get("type")
                if (kind is not None and not isinstance(kind, str)) or kind == "null":
                    unions.append(f"{path}.type")
                unions.extend(f"{path}.{key}" for key in ("anyOf", "oneOf", "allOf") if key in node)
                for key, value in node.items():
                    walk(value, f"{path}.{key}")
            elif isinstance(node, list):
                for item in node:
                    walk(item, path)

        for entry in entries:
            walk(entry["inputSchema"], entry["name"])
        assert [] == unions

    def test_unread_and_flagged_advertise_plain_booleans(
        self, entries: list[dict[str, Any]]
    ) -> None:
        search = by_name(entries)["mail_query"]["inputSchema"]["properties"]["search"]
        assert [{"type": "boolean"}, {"type": "boolean"}] == [
            search["properties"]["unread"],
            search["properties"]["flagged"],
        ]

    def test_no_title_output_schema_or_default_anywhere(
        self, entries: list[dict[str, Any]]
    ) -> None:
        text = compact_bytes(entries).decode()
        for key in ('"title"', '"outputSchema"', '"default"'):
            assert key not in text


class TestBudget:
    def test_snapshot_matches_the_reviewed_fixture_byte_for_byte(
        self, entries: list[dict[str, Any]]
    ) -> None:
        assert FIXTURE.read_bytes() == compact_bytes(entries) + b"\n"

    def test_complete_discovery_stays_within_the_original_size(
        self, entries: list[dict[str, Any]]
    ) -> None:
        complete = len(compact_bytes(entries))
        schemas = sum(len(compact_bytes(e["inputSchema"])) for e in entries)
        print(f"complete discovery {complete} bytes; input schemas {schemas} bytes")
        assert complete <= DISCOVERY_BUDGET_BYTES

    def test_structural_budget_and_mirror_cap(self, entries: list[dict[str, Any]]) -> None:
        complete = len(compact_bytes(entries))
        structural = len(
            compact_bytes([{k: v for k, v in e.items() if k != "securitySchemes"} for e in entries])
        )
        assert structural - 768 - 512 <= 0.70 * BASELINE_01
        assert complete - structural <= 512

    def test_expanded_form_stays_within_first_use_growth(
        self, entries: list[dict[str, Any]]
    ) -> None:
        expanded = [{**e, "inputSchema": expand_refs(e["inputSchema"])} for e in entries]
        assert "$ref" not in compact_bytes(expanded).decode()
        assert len(compact_bytes(expanded)) <= 12_299 + 512


class TestUsability:
    def test_action_descriptions_list_every_usage(self, entries: list[dict[str, Any]]) -> None:
        tools = by_name(entries)
        for tool in TOOLS:
            if not tool.actions:
                continue
            text = tools[tool.name]["inputSchema"]["properties"]["action"]["description"]
            for action in tool.actions:
                assert action_usage(action) in text
            assert "?=optional" in text

    def test_query_usage_lines_are_exact(self) -> None:
        from schemas.args.query import QUERY_ACTIONS

        assert {
            "attachment(reference,index)",
            "capabilities()",
            "conversation(reference,search?,detail?)",
            "draft(reference)",
            "folders()",
            "read(reference,detail?)",
            "read_many(references,detail?,max_response_bytes?)",
            "search(search?,detail?)",
            "send_status(prepared_id)",
            "triage(search?,detail?)",
        } == {action_usage(a) for a in QUERY_ACTIONS}

    @pytest.mark.parametrize(
        ("tool", "fact"),
        [
            ("mail_query", "page folder + page uid_validity + row uid"),
            ("mail_query", "zero-based next_index"),
            ("mail_query", "literal text"),
            ("mail_query", "inclusive/exclusive"),
            ("mail_query", "even after empty pages"),
            ("mail_query", "never marks mail read"),
            ("mail_query", "All Mail is not Archive"),
            ("mail_create", "from mail_query draft"),
            ("mail_create", "both text and html"),
            ("mail_modify", "\\\\Seen=read"),
            ("mail_modify", "\\\\Flagged=starred"),
            ("mail_modify", "observed modseq"),
            ("mail_prepare", "omit for eml/none"),
            ("mail_prepare", "need recipients"),
            ("mail_prepare", "never bcc"),
            ("mail_send_confirmed", "approved preview"),
            ("mail_send_confirmed", "smtp_stores_sent"),
            ("mail_send_confirmed", "not delivery"),
            ("mail_send_confirmed", "never resend"),
        ],
    )
    def test_first_use_fact_is_stated(
        self, entries: list[dict[str, Any]], tool: str, fact: str
    ) -> None:
        assert fact in json.dumps(by_name(entries)[tool])
