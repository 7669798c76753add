"""Generated write calls with every gate open: an invalid argument set never reaches the mailbox.

mail_create (folder, copy), mail_modify (flags, rename, move, trash) and
mail_delete_permanently are called with the writes and delete gates on and all scopes, so
nothing but argument validation stands between a call and Dovecot. Every IMAP connection and
command passes the recording proxy; for each call the decoder rejects (and each Graph
reference, which an IMAP mailbox refuses), the server must answer invalid_arguments with the
proxy's counts unchanged.

Calls that do decode are only let through when they cannot hurt the shared mailbox: folder
names come from a small pool where the only writable ones carry this run's prefix (and are
deleted afterwards), and a reference to a real folder never carries its real UIDVALIDITY.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio.from_thread
import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mcp import Client

from schemas.args.common import Ref
from schemas.args.create import ReviseDraft, SaveDraft
from schemas.args.modify import Rename
from schemas.discovery import TOOLS_BY_NAME
from schemas.errors import InvalidArguments
from service.app import build_app
from service.config import load_config
from service.mcp_server import build_server
from service.principal import local_principal
from service.tool_call import decode_arguments
from support.imap import close_session, ok, open_session, quote_mailbox
from support.imap_proxy import ImapProxy
from support.services import Services
from support.write_calls import GATES_ON, list_names, status_number

pytestmark = pytest.mark.services
EXAMPLES = int(os.environ.get("ANGELOS_WRITES_FUZZ_EXAMPLES", "400"))
RUN = f"fuzzw-{uuid.uuid4().hex[:8]}"
REAL_FOLDERS = ("INBOX", "Archive", "Trash")
FOLDER_NAMES = [
    "INBOX",
    "inbox",
    "Archive",
    "Trash",
    "",
    "a\nb",
    "x\u200by",
    "é" * 600,
    f"{RUN}-a",
    f"{RUN}-b",
]

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)
folders = st.sampled_from(FOLDER_NAMES)
numbers = st.one_of(
    st.integers(min_value=-2, max_value=6), st.sampled_from([0, 2**32 - 1, 2**32, 2**64])
)
noisy_ref = st.fixed_dictionaries(
    {"folder": folders | json_value},
    optional={
        "uid_validity": numbers | json_value,
        "uid": numbers,
        "provider": st.sampled_from(["", "microsoft_graph", "imap"]),
        "account": st.sampled_from(["", "acc", "a b"]),
        "id": st.sampled_from(["", "m1", "\n"]),
    },
)
good_ref = st.fixed_dictionaries(
    {"folder": folders, "uid_validity": st.integers(1, 2**32 - 1), "uid": st.integers(1, 40)}
)
ref = good_ref | noisy_ref
flag = st.sampled_from(
    ["\\Seen", "\\seen", "\\Flagged", "\\Deleted", "\\Recent", "\\Custom", "$Label1", "bad flag"]
) | st.text(max_size=4)
good_flags = st.lists(st.sampled_from(["\\Seen", "\\flagged", "$Label1"]), min_size=1, max_size=3)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "reference": ref | json_value,
    "destination": folders | json_value,
    "name": folders | json_value,
    "old": folders | json_value,
    "new": folders | json_value,
    "operation": st.sampled_from(["add", "remove", "replace", ""]) | json_value,
    "flags": good_flags | st.lists(flag, max_size=34) | json_value,
    "unchanged_since": st.integers(min_value=-1, max_value=2**64) | json_value,
    "message": st.just({"to": ["pat@example.test"], "text": "hi"}) | json_value,
    "folder": folders | json_value,
    "source_digest": st.just("0" * 64) | json_value,
    "changes": st.just({"subject": "x"}) | json_value,
    "credential": json_value,
}
ACTIONS = {
    "mail_create": ["folder", "copy", "draft", "revise_draft"],
    "mail_modify": ["flags", "rename", "move", "trash"],
}
REQUIRED = {
    "folder": ["name"],
    "copy": ["reference", "destination"],
    "flags": ["reference", "operation", "flags"],
    "rename": ["old", "new"],
    "move": ["reference", "destination"],
    "trash": ["reference"],
}


def action_calls(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Calls built around one action: its required keys (some dropped) plus stray keys."""
    action = st.sampled_from([*ACTIONS[tool], "x", ""]) | json_value

    def build(name: Any) -> st.SearchStrategy[dict[str, Any]]:
        wanted = REQUIRED.get(name, []) if isinstance(name, str) else []
        required = {k: VALUES[k] for k in wanted}
        stray = st.dictionaries(st.sampled_from(sorted(VALUES)), st.just(None), max_size=2)
        return stray.flatmap(
            lambda extra: st.fixed_dictionaries(
                {"action": st.just(name), **required},
                optional={k: VALUES[k] for k in extra if k not in required},
            )
        )

    return action.flatmap(build)


def delete_calls() -> st.SearchStrategy[dict[str, Any]]:
    """Reference objects, sometimes with an action or a nested reference."""
    extra = st.dictionaries(
        st.sampled_from(["action", "reference", "flags", "credential"]), json_value, max_size=2
    )
    return st.tuples(ref, extra).map(lambda pair: {**pair[0], **pair[1]})


def calls_for(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    if tool == "mail_delete_permanently":
        return delete_calls()
    return action_calls(tool)


def harmless(decoded: msgspec.Struct, real: dict[str, int]) -> bool:
    """Tell whether a call that decodes can run against the shared mailbox without harm."""
    if isinstance(decoded, SaveDraft | ReviseDraft):
        return False  # another suite's feature; its valid calls would APPEND drafts
    if isinstance(decoded, Rename):
        return decoded.old.startswith(RUN)
    target = decoded if isinstance(decoded, Ref) else getattr(decoded, "reference", None)
    if isinstance(target, Ref) and not target.is_graph:
        folder = "INBOX" if target.folder.upper() == "INBOX" else target.folder
        return real.get(folder) != target.uid_validity
    return True


@pytest.fixture(scope="module")
def harness(services: Services) -> Iterator[tuple[Any, Any, ImapProxy, dict[str, int]]]:
    """One in-process MCP client, all gates open, whose IMAP goes through the recording proxy."""
    with anyio.from_thread.start_blocking_portal() as portal:
        real = portal.call(real_validities, services)
        with portal.wrap_async_context_manager(ImapProxy(services)) as proxy:
            env = {**services.product_env, "IMAP_PORT": str(proxy.port), **GATES_ON}
            app = build_app(load_config(env))
            principal = local_principal("writes-fuzz", ("mail.read", "mail.write", "mail.send"))
            server = build_server(app, lambda ctx: principal)
            try:
                with portal.wrap_async_context_manager(Client(server)) as client:
                    yield portal, client, proxy, real
            finally:
                portal.call(app.aclose)
        portal.call(remove_run_folders, services)


async def real_validities(services: Services) -> dict[str, int]:
    imap = await open_session(services)
    try:
        return {f: await status_number(imap, f, "UIDVALIDITY") for f in REAL_FOLDERS}
    finally:
        await close_session(imap)


async def remove_run_folders(services: Services) -> None:
    created = sorted(n for n in await list_names(services) if n.startswith(RUN))
    imap = await open_session(services)
    try:
        for name in created:
            ok(await imap.delete(quote_mailbox(name)), f"DELETE {name}")
    finally:
        await close_session(imap)


def check_one(harness: tuple[Any, Any, ImapProxy, dict[str, int]], tool: str, args: Any) -> str:
    """Call once; an argument set the decoder rejects must never show up on the wire."""
    portal, client, proxy, real = harness
    try:
        decoded = decode_arguments(TOOLS_BY_NAME[tool], args)
    except InvalidArguments:
        decoded = None
    assume(decoded is None or harmless(decoded, real))
    before = proxy.snapshot()
    result = portal.call(client.call_tool, tool, args)
    body = result.structured_content
    assert isinstance(body, dict)
    code: str = body["error_code"] if result.is_error else "ok"
    if decoded is None or graph_reference(decoded):
        assert "invalid_arguments" == code, (args, body)
        assert before == proxy.snapshot(), f"an invalid call reached the mailbox: {args!r}"
    # A call that decodes may still be refused as invalid after looking at the mailbox (a
    # message already in Trash cannot be trashed): only the decoder's verdict is pre-access.
    return code


def graph_reference(decoded: msgspec.Struct) -> bool:
    """Tell whether the call names a Microsoft Graph reference (refused for IMAP, no access)."""
    target = decoded if isinstance(decoded, Ref) else getattr(decoded, "reference", None)
    return isinstance(target, Ref) and target.is_graph


@pytest.mark.parametrize("tool", ["mail_create", "mail_modify", "mail_delete_permanently"])
def test_no_invalid_argument_set_reaches_the_mailbox(
    harness: tuple[Any, Any, ImapProxy, dict[str, int]], tool: str
) -> None:
    seen: Counter[str] = Counter()
    proxy = harness[2]
    commands_before = len(proxy.commands)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(calls_for(tool))
    def run(args: Any) -> None:
        seen[check_one(harness, tool, args)] += 1

    run()
    total = sum(seen.values())
    reached = len(proxy.commands) - commands_before
    print(f"{tool}: {total} calls {dict(seen.most_common())}; {reached} IMAP commands")
    assert seen["invalid_arguments"] > total // 2, "the strategy must mostly break the rules"
    assert seen["invalid_arguments"] < total, "some calls must pass validation too"
    assert reached > 0, "valid calls did reach the mailbox, so the witness is live"
