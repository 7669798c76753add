"""Generated arguments never crash the server, and invalid ones never reach the mailbox."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio.from_thread
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from schemas.discovery import TOOLS_BY_NAME, tool_entries
from schemas.error_object import GUIDANCE
from service.app import build_app
from service.config import load_config
from service.mcp_server import build_server
from service.principal import local_principal
from support.counting_proxy import CountingProxy

EXAMPLES = int(os.environ.get("ANGELOS_FUZZ_EXAMPLES", "2000"))
SCHEMAS = {e["name"]: e["inputSchema"] for e in tool_entries()}

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**66), max_value=2**66),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=24),
)
json_value = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
uid = st.one_of(st.integers(min_value=-1, max_value=5), st.sampled_from([4294967295, 4294967296]))
ref = st.fixed_dictionaries(
    {"folder": st.sampled_from(["INBOX", "Archive", "", "a\nb"]) | st.text(max_size=6)},
    optional={
        "uid": uid,
        "uid_validity": uid,
        "provider": st.sampled_from(["", "microsoft_graph", "imap"]),
        "id": st.text(max_size=4),
        "account": st.text(max_size=4),
    },
)


def plausible(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Draw values that mostly fit a property's schema, and sometimes do not."""
    if "$ref" in schema:
        return ref
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | json_value
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        props = schema["properties"]
        return st.dictionaries(
            st.sampled_from(sorted(props)) | st.text(max_size=6),
            st.deferred(lambda: json_value),
            max_size=4,
        ).flatmap(
            lambda d: st.fixed_dictionaries(
                {k: plausible(props[k], defs) if k in props else st.just(v) for k, v in d.items()}
            )
        )
    if kind == "array":
        items = schema.get("items", {})
        return st.lists(plausible(items, defs) if items else json_value, max_size=11) | json_value
    if kind == "integer":
        return st.integers(min_value=-2, max_value=2**65) | json_value
    if kind == "boolean":
        return st.booleans() | json_value
    if kind == "string":
        pattern = schema.get("pattern")
        if pattern:
            return st.from_regex(pattern, fullmatch=True) | st.text(max_size=70)
        return st.text(max_size=12) | st.sampled_from(["INBOX", "Archive", "2026-01-31"])
    return json_value


hex32 = st.from_regex(r"[0-9a-f]{32}", fullmatch=True)
hex64 = st.from_regex(r"[0-9a-f]{64}", fullmatch=True)
folder = st.sampled_from(["INBOX", "Archive", "Projets/Café Été 2026", "Nowhere"])
good_ref = st.fixed_dictionaries(
    {"folder": folder, "uid_validity": st.integers(1, 2**32 - 1), "uid": st.integers(1, 50)}
)
GOOD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "reference": good_ref,
    "references": st.lists(good_ref, min_size=1, max_size=3, unique_by=lambda r: str(r)),
    "search": st.just({}) | st.fixed_dictionaries({}, optional={"limit": st.integers(1, 100)}),
    "detail": st.sampled_from(["summary", "full"]),
    "index": st.integers(1, 100),
    "max_response_bytes": st.integers(4096, 131072),
    "prepared_id": hex32,
    "source_digest": hex64,
    "confirmed_digest": hex64,
    "message": st.just({}) | st.just({"to": ["pat@example.test"], "text": "hello"}),
    "changes": st.just({"subject": "revised"}),
    "name": folder,
    "destination": st.just("Archive"),
    "folder": folder,
    "old": st.just("Old name"),
    "new": st.just("New name"),
    "operation": st.sampled_from(["add", "remove"]),
    "flags": st.just(["\\Seen"]),
    "unchanged_since": st.integers(0, 2**64 - 1),
    "quote_original": st.booleans(),
    "attachment_indexes": st.just([1]),
    "append_sent": st.booleans(),
    "uid_validity": st.integers(1, 2**32 - 1),
    "uid": st.integers(1, 50),
}


def valid_calls(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Draw well-formed calls: an action with its required fields and some optional ones."""
    spec = TOOLS_BY_NAME[tool]
    choices = list(spec.actions) or [spec.direct]
    return st.sampled_from(choices).flatmap(lambda cls: _fill(cls))


def _fill(cls: Any) -> st.SearchStrategy[dict[str, Any]]:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    required = {f.encode_name: GOOD_VALUES[f.encode_name] for f in info.fields if f.required}
    optional = {
        f.encode_name: GOOD_VALUES[f.encode_name]
        for f in info.fields
        if not f.required and f.encode_name in GOOD_VALUES and f.encode_name != "quote_original"
    }
    if isinstance(info.tag, str):
        required["action"] = st.just(info.tag)
    return st.fixed_dictionaries(required, optional=optional)


def broken(call: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Break one well-formed call: an extra key, a null, or a wrong type."""
    keys = sorted(call)
    return st.one_of(
        st.just({**call, "credential": "x"}),
        st.sampled_from(keys).map(lambda k: {**call, k: None}),
        st.sampled_from(keys).flatmap(lambda k: json_value.map(lambda v: {**call, k: v})),
    )


def arguments_for(tool: str) -> st.SearchStrategy[Any]:
    """Draw argument objects for one tool from its own advertised schema, plus noise."""
    schema = SCHEMAS[tool]
    props = schema["properties"]
    defs = schema.get("$defs", {})
    keys = st.sampled_from(sorted(props)) | st.sampled_from(["credential", "reference", "x"])
    objects = st.dictionaries(keys, st.just(None), max_size=5).flatmap(
        lambda d: st.fixed_dictionaries(
            {k: plausible(props[k], defs) if k in props else json_value for k in d}
        )
    )
    if tool == "mail_delete_permanently":
        objects = objects | ref
    # mcp's Client itself refuses non-object arguments; the unit tests cover those.
    well_formed = valid_calls(tool)
    return st.one_of(
        well_formed,
        well_formed.flatmap(broken),
        objects,
        st.dictionaries(st.text(max_size=8), json_value, max_size=4),
    )


@pytest.fixture(scope="module")
def harness(services: Any) -> Iterator[tuple[Any, Any, CountingProxy]]:
    """Run one in-process MCP client against a server whose IMAP goes through a counting proxy."""
    with CountingProxy("127.0.0.1", int(services.imap_port)) as proxy:
        env = {**services.product_env, "IMAP_PORT": str(proxy.port)}
        # Gates stay off (product_env sets none): valid write or send calls must stop at
        # deployment_disabled, so generated calls never change the shared test mailbox.
        config = load_config(env)
        assert config.mail is not None, config.problems
        app = build_app(config)
        principal = local_principal("fuzz", ("mail.read", "mail.write", "mail.send"))
        server = build_server(app, lambda ctx: principal)
        with anyio.from_thread.start_blocking_portal() as portal:
            portal.call(app.start)
            with portal.wrap_async_context_manager(Client(server)) as client:
                yield portal, client, proxy
            portal.call(app.aclose)


def check_one(harness: tuple[Any, Any, CountingProxy], tool: str, arguments: Any) -> str:
    """Call once; return "ok" or the error code, asserting the contract on the way."""
    portal, client, proxy = harness
    before = proxy.snapshot()
    result = portal.call(client.call_tool, tool, arguments)
    body = result.structured_content
    assert isinstance(body, dict)
    if not result.is_error:
        return "ok"
    assert body["error_code"] in GUIDANCE
    assert {"error", "outcome", "retry_safe", "error_code", "recovery", "retry"} <= set(body)
    if body["error_code"] != "insufficient_scope":
        assert json.loads(result.content[0].text) == body
    if body["error_code"] == "invalid_arguments":
        assert before == proxy.snapshot(), "an invalid call touched the mailbox"
    code: str = body["error_code"]
    return code


@pytest.mark.parametrize("tool", sorted(TOOLS_BY_NAME))
def test_generated_arguments_yield_results_or_application_errors(
    harness: tuple[Any, Any, CountingProxy], tool: str
) -> None:
    seen: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(arguments_for(tool))
    def run(arguments: Any) -> None:
        seen[check_one(harness, tool, arguments)] += 1

    run()
    total = sum(seen.values())
    print(f"{tool}: {total} generated argument objects: {dict(seen.most_common())}")
    assert total >= min(EXAMPLES, 2000)
    assert seen["invalid_arguments"] < total, "the strategy must also produce valid calls"
