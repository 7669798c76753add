"""What the approval race tests (test_approval_races.py) share: the environment of a server
without the fault matrices' 1 s leases, a server that dies right after an approval is durable
(approval_fault_server.py), MCP calls that return their structured content, and reads of the
ledger and the SMTP sink.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mcp_types as types
from faults.harness import OWNER, Server, start_servers
from mcp import Client

from ledger.chain import verified_events
from ledger.lifecycle import fold
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from service.approval.gate import APPROVE
from support.angelos_process import ROOT, clean_env, free_port
from support.services import Services
from support.smtp_sink import transactions

APPROVAL_FAULT_SERVER = Path(__file__).with_name("approval_fault_server.py")


def env_for(services: Services, namespace: str, **extra: str) -> dict[str, str]:
    """A server's (and the ledger CLI's) environment: production timings, not the fault
    matrices' 1 s leases, so a busy machine cannot lapse a lease mid-test."""
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "ANGELOS_LOCAL_SCOPES": "mail.read mail.write mail.send",
        "SEND_LEDGER_NAMESPACE": namespace,
        **extra,
    }


def tag() -> str:
    """A fresh name part (namespaces, recipients the sink has never seen)."""
    return uuid.uuid4().hex[:10]


class ApprovalFaultServer(Server):
    """`angelos serve --transport http` through approval_fault_server.py (armed by the env)."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(APPROVAL_FAULT_SERVER), "serve", "--transport", "http",
             "--host", "127.0.0.1", "--port", str(self.port), "--insecure-local-owner", OWNER],
            env=clean_env(env), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self._log,
        )  # fmt: skip


def stop_all(servers: list[Server]) -> None:
    """Stop several servers at once (each drains its dispatches and releases its lease)."""
    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(Server.stop, servers))


@contextlib.contextmanager
def server_pair(
    services: Services, logs: Path, namespace: str, **extra: str
) -> Iterator[tuple[dict[str, str], list[Server]]]:
    """Two `angelos serve` processes sharing one Redis namespace; both stopped after."""
    env = env_for(services, namespace, **extra)
    servers = start_servers([env, env], logs)
    try:
        yield env, servers
    finally:
        stop_all(servers)


class Asked:
    """An elicitation callback that accepts ("send") and counts what it was asked."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.messages.append(params.message)
        return types.ElicitResult(action="accept", content=dict(APPROVE))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tools/call; its structured content plus `_is_error`."""
    result = await client.call_tool(tool, arguments)
    body: dict[str, Any] = dict(result.structured_content or {})
    body["_is_error"] = bool(result.is_error)
    return body


async def prepare(client: Client, rcpt: str) -> dict[str, Any]:
    """mail_prepare a small message to one recipient."""
    message = {"to": [rcpt], "subject": "Approval race", "text": "Hello"}
    body = await call(client, "mail_prepare", {"action": "new", "message": message})
    assert body.get("status") == "prepared", body
    return body


async def confirm(client: Client, preview: dict[str, Any]) -> dict[str, Any]:
    """mail_send_confirmed for a preview."""
    return await call(client, "mail_send_confirmed", {
        "prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
        "append_sent": False,
    })  # fmt: skip


async def send_status(client: Client, pid: str) -> dict[str, Any]:
    """send_status of one prepared_id."""
    return await call(client, "mail_query", {"action": "send_status", "prepared_id": pid})


def sink(services: Services, rcpt: str) -> list[str]:
    """The outcomes of the SMTP sink's DATA transactions naming `rcpt`."""
    return sinks(services, [rcpt])[rcpt]


def sinks(services: Services, rcpts: list[str]) -> dict[str, list[str]]:
    """The outcomes of the sink's transactions by recipient, from one read of its log."""
    seen: dict[str, list[str]] = {rcpt.lower(): [] for rcpt in rcpts}
    for transaction in transactions(services.smtp_spool):
        for rcpt in {r.lower() for r in transaction.rcpt_tos} & seen.keys():
            seen[rcpt].append(transaction.outcome)
    return {rcpt: seen[rcpt.lower()] for rcpt in rcpts}


@contextlib.asynccontextmanager
async def ledgers(services: Services) -> AsyncIterator[Callable[[str], LedgerStore]]:
    """A factory of LedgerStores on the test Redis, one per namespace; closed after."""
    client = connect(services.redis_url)
    try:
        yield lambda namespace: LedgerStore(client, LedgerSettings(namespace=namespace))
    finally:
        await client.aclose()


async def types_of(store: LedgerStore, pid: str) -> list[str]:
    """The event types of one stream, in order."""
    _, entries = await store.read(pid)
    return [e.t for e in entries]


async def state_of(store: LedgerStore, pid: str) -> str:
    """The lifecycle state of one stream (PREPARED, APPROVED, CLAIMED, ...)."""
    _, entries = await store.read(pid)
    return fold(verified_events(pid, entries), [e.srv_ms for e in entries]).state


async def rate_members(store: LedgerStore) -> list[str]:
    """The prepared_ids in the namespace's send rate window (`<ns>:rate`), oldest first."""
    members = await store.client.zrange(store.keys.rate, 0, -1)
    return [m.decode() if isinstance(m, bytes) else str(m) for m in members]
