"""scripts/graph-smoke, the owner's check against live Graph, run here against the Graph double.

The script runs as a subprocess, as the owner runs it; its pinned hosts (graph.microsoft.com,
login.microsoftonline.com) reach the double and the token endpoint of this test process only
through the test tree's launcher, tests/support/pinned_script.py.
"""

from __future__ import annotations

import json
import uuid

import pytest

from support.angelos_process import ROOT
from support.graph_deploy import CLIENT_SECRET, GraphRig
from support.pinned_process import run_pinned

pytestmark = pytest.mark.services

SCRIPT = ROOT / "scripts" / "graph-smoke"
LAUNCH = ROOT / "tests" / "support" / "pinned_script.py"
READ_STEPS = ["capabilities", "folders", "search", "search_next", "read", "read_many", "sent_items"]


async def smoke(graph: GraphRig, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """Run scripts/graph-smoke with `args` through the launcher; its status, stdout and stderr."""
    return await run_pinned(
        graph.services, graph.routes(), env, str(SCRIPT), *args, launcher=str(LAUNCH)
    )


def steps(out: str) -> list[tuple[str, str]]:
    """Each printed line as (ok or FAIL, step name)."""
    return [(line.split()[0], line.split()[1].rstrip(":")) for line in out.splitlines()]


def writes(graph: GraphRig) -> list[tuple[str, str]]:
    """Every request the double received that could change the mailbox."""
    return [(e.method, e.route) for e in graph.double.exchanges if e.method != "GET"]


def assert_no_secrets(graph: GraphRig, env: dict[str, str], output: str) -> None:
    """No refresh token, client secret, encryption key or access token the double took."""
    used = {e.headers.get("Authorization", "").partition(" ")[2] for e in graph.double.exchanges}
    secrets = {
        env["MICROSOFT_REFRESH_TOKEN"],
        CLIENT_SECRET,
        env["MICROSOFT_TOKEN_ENCRYPTION_KEY"],
        *(token for token in used if token),
    }
    assert len(secrets) > 3 and not [s for s in secrets if s in output]


async def test_a_read_only_run_is_all_ok_and_writes_nothing(graph: GraphRig) -> None:
    env = graph.env()
    code, out, err = await smoke(graph, env)
    assert 0 == code, out + err
    assert [("ok", name) for name in READ_STEPS] == steps(out), out
    assert "provider microsoft_graph" in out and "\\Inbox" in out and "a next_cursor" in out
    assert 2 == out.count("flags unchanged"), out  # read and read_many marked nothing read
    assert [] == writes(graph) and [] == graph.double.sent
    # Counts only: no address, nor the newest message's subject or text.
    assert not [s for s in ("@", "Book club", "ordinary message number") if s in out], out
    assert_no_secrets(graph, env, out + err)


async def test_send_to_sends_once_and_finds_the_sent_items_copy(graph: GraphRig) -> None:
    env = graph.env()
    recipient = f"smoke-{uuid.uuid4().hex[:8]}@example.test"
    code, out, err = await smoke(graph, env, "--send-to", recipient)
    assert 0 == code, out + err
    expected = [*READ_STEPS, "prepare", "send", "send_status", "sent_copy"]
    assert [("ok", name) for name in expected] == steps(out), out
    assert "send: status accepted (confirmed once; this script never retries a send)" in out
    assert "Microsoft filed it: 1 copy in Sent Items" in out
    assert [("POST", "/me/sendMail")] == writes(graph)
    [mime] = graph.double.sent
    assert b"Subject: angelos graph-smoke 20" in mime and recipient.encode() in mime
    assert "@" not in out, out
    assert_no_secrets(graph, env, out + err)


async def test_another_account_fails_every_step_and_sends_nothing(graph: GraphRig) -> None:
    graph.double.identity(id="another-account-0000")
    env = graph.env()
    code, out, err = await smoke(graph, env, "--send-to", "pat@example.test")
    assert 1 == code, out + err
    lines = out.splitlines()
    assert lines and all(line.startswith("FAIL ") for line in lines), out
    named = [line.split()[1].rstrip(":") for line in lines if "MICROSOFT_ACCOUNT_ID" in line]
    assert ["capabilities", "folders", "search", "sent_items"] == named, out
    assert "FAIL search_next: not_run: the search step failed" in lines
    assert "FAIL send: not_run: an earlier step failed, so nothing is sent" == lines[-1]
    assert [] == writes(graph) and [] == graph.double.sent
    assert_no_secrets(graph, env, out + err)


async def test_json_prints_one_object(graph: GraphRig) -> None:
    code, out, err = await smoke(graph, graph.env(), "--json")
    assert 0 == code, out + err
    result = json.loads(out)
    assert (True, False) == (result["ok"], result["send"])
    assert [(name, True) for name in READ_STEPS] == [(s["step"], s["ok"]) for s in result["steps"]]


async def test_a_mailbox_that_is_not_microsoft_is_refused(graph: GraphRig) -> None:
    code, out, err = await smoke(graph, graph.services.product_env)
    assert (2, "") == (code, out)
    assert "MAIL_PROVIDER" in err and [] == graph.double.exchanges
