"""Peer benchmark: angelos against mcp-email-server 1.13.3, side by side in one run.

Run under the test peers:  scripts/test-services run -- .venv/bin/python bench/peer.py
The first run installs the peer (pinned in bench/peer-requirements.txt) into bench/.peer-venv
from PyPI; its `mcp<2` cannot share our venv. Both servers run over stdio through mcp's
Client (the peer in mode="legacy", the initialize handshake it speaks) against the same Dovecot
and the same folder of 1,041 messages, every tenth (the newest too) with a PDF attachment.
A round is one agent task in each server's own tools: list the newest 25 messages' metadata,
read 5 full bodies, fetch one attachment of a message just read. The peer runs twice, each in
its own process and HOME: with its documented defaults (plus attachment content switched on,
which the task needs), and at its best: the metadata snapshot sized to the folder, the largest
refresh batch and header budget, warnings-only logging, knobs read from its source
(application/limits.py, log.py); nothing that weakens it, TLS verification stays on. angelos
and the two peers take turns round by round, at loopback and again with every IMAP connection
of all three through one proxy adding 20 ms round trip. Printed: each server's discovery
bytes, the cold first round (the peer's metadata cache starts empty), warm medians per step and
per round with the ratio peer / angelos (target: >= 10x per round against the peer at its
best, in both cases), and IMAP logins and connections per round (Dovecot's log; at 20 ms the
proxy counts connections). `--rounds N` sets the warm rounds (default 15).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.counting_proxy import CountingProxy  # noqa: E402
from support.imap import Append, append_messages, close_session, open_session  # noqa: E402
from support.services import Services, services_from_env  # noqa: E402

PEER_VERSION = "1.13.3"
REQUIREMENTS = ROOT / "bench" / "peer-requirements.txt"
PEER_VENV = ROOT / "bench" / ".peer-venv"
CORPUS = 1041  # over the peer's default 1,000-row snapshot, as a real mailbox soon is
ATTACH_EVERY = 10
LIST_ROWS = 25
READS = 5
STEPS = ("list", "read", "attachment")
ACCOUNT = "bench"

# The peer's settings found only in its source (application/limits.py), each at the value that
# serves this workload best: a snapshot holding the whole folder answers listings from its
# SQLite cache after one STATUS; the largest refresh batch (which the header budget caps at
# budget / 64 KiB) makes the cold build take the fewest round trips; less logging, less work.
PEER_BEST = {
    "MCP_EMAIL_SERVER_METADATA_SNAPSHOT_ROWS": "100000",
    "MCP_EMAIL_SERVER_METADATA_REFRESH_BATCH_SIZE": "1000",
    "MCP_EMAIL_SERVER_METADATA_HEADER_BUDGET_BYTES": str(64 * 1024 * 1024),
    "MCP_EMAIL_SERVER_LOG_LEVEL": "WARNING",
}


def ensure_peer() -> Path:
    """Install the pinned peer into its own venv unless it is already there; return its command."""
    wanted = REQUIREMENTS.read_bytes()
    stamp = PEER_VENV / "requirements.installed"
    command = PEER_VENV / "bin" / "mcp-email-server"
    if command.exists() and stamp.exists() and stamp.read_bytes() == wanted:
        return command
    print(f"installing mcp-email-server {PEER_VERSION} into {PEER_VENV} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEER_VENV)], check=True)
    pip = [str(PEER_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--no-deps", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_bytes(wanted)
    return command


def message(i: int) -> bytes:
    """Message i of the corpus: a 3 KB text body, and every tenth a 24 KB PDF attachment."""
    msg = EmailMessage()
    msg["From"] = f"Sender {i % 17} <sender{i % 17}@example.test>"
    msg["To"] = "alice@example.test"
    msg["Subject"] = f"Peer benchmark message {i}"
    msg["Date"] = (datetime(2026, 1, 5, tzinfo=UTC) + timedelta(minutes=i)).strftime(
        "%a, %d %b %Y %H:%M:%S +0000"
    )
    msg["Message-ID"] = f"<peer-{i}-{uuid.uuid4().hex}@example.test>"
    line = f"Line of message {i}: the quick brown fox jumps over the lazy dog.\n"
    msg.set_content(line * (3000 // len(line)))
    if (CORPUS - 1 - i) % ATTACH_EVERY == 0:
        pdf = b"%PDF-1.4\n% synthetic\n" + hashlib.sha256(str(i).encode()).digest() * 750
        msg.add_attachment(pdf, maintype="application", subtype="pdf", filename=f"report-{i}.pdf")
    return msg.as_bytes()


async def seed(services: Services) -> str:
    """Append the corpus to a fresh folder, oldest first, with increasing arrival times."""
    imap = await open_session(services, command_timeout=120)
    try:
        folder = f"peer-{uuid.uuid4().hex[:8]}"
        await imap.create(f'"{folder}"')
        start = datetime(2026, 1, 5, tzinfo=UTC)
        # Distinct INTERNALDATEs: the peer orders by arrival, angelos by UID; both agree then.
        appends = [
            Append(message(i), internal_date=start + timedelta(minutes=i)) for i in range(CORPUS)
        ]
        await append_messages(imap, folder, appends)
        return folder
    finally:
        await close_session(imap)


@dataclass
class Witness:
    """Per-round IMAP logins and connections: Dovecot's log, and the proxy when there is one."""

    log: Path
    proxy: CountingProxy | None
    offset: int = 0
    connections: int = 0

    def mark(self) -> None:
        """Start counting from now."""
        self.offset = self.log.stat().st_size
        self.connections = self.proxy.connections if self.proxy else 0

    async def count(self, user: str) -> tuple[int, int]:
        """Return (logins, connections) since mark(); loopback counts connections from the log."""
        await asyncio.sleep(0.15)  # Dovecot's log process writes a moment after the login
        with self.log.open("rb") as f:
            f.seek(self.offset)
            lines = f.read().decode(errors="replace").splitlines()
        logins = sum("imap-login: Info: Login: " in ln and f"user=<{user}>" in ln for ln in lines)
        if self.proxy is not None:
            return logins, self.proxy.connections - self.connections
        # Without a proxy, a connection either logged in or left imap-login without doing so.
        unauthed = sum("imap-login: Info: " in ln and "Login: " not in ln for ln in lines)
        return logins, logins + unauthed


Timings = dict[str, float]


@dataclass
class Server:
    """One MCP server process and the agent task in its own tools."""

    name: str
    client: Client
    run: Callable[[Server], Awaitable[tuple[Timings, dict[str, Any]]]]
    folder: str
    rounds: list[Timings] = field(default_factory=list)
    cold: Timings = field(default_factory=dict)
    io: list[tuple[int, int]] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)


async def timed(steps: Timings, step: str, call: Awaitable[Any]) -> Any:
    """Await call, recording its wall time under step."""
    started = time.perf_counter()
    result = await call
    steps[step] = time.perf_counter() - started
    return result


def checked(result: Any) -> dict[str, Any]:
    """The structured answer of a tool call, or the JSON in its first text block."""
    if result.is_error:
        raise RuntimeError(f"tool error: {result.content!r}"[:2000])
    if result.structured_content:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


async def angelos_task(server: Server) -> tuple[Timings, dict[str, Any]]:
    """search 25 summaries; read_many of the 5 newest in full; the attachment of one of them."""
    steps: Timings = {}
    call = server.client.call_tool
    search = {"action": "search", "search": {"folder": server.folder, "limit": LIST_ROWS}}
    page = checked(await timed(steps, "list", call("mail_query", search)))
    refs = [
        {"folder": page["folder"], "uid_validity": page["uid_validity"], "uid": row["uid"]}
        for row in page["messages"]
    ]
    many = {"action": "read_many", "references": refs[:READS], "detail": "full"}
    batch = checked(await timed(steps, "read", call("mail_query", many)))
    messages = [item["message"] for item in batch["items"] if item["status"] == "ok"]
    holder = next(m for m in messages if m["attachments"])
    fetch = {"action": "attachment", "reference": holder["reference"], "index": 1}
    got = checked(await timed(steps, "attachment", call("mail_query", fetch)))
    data = base64.b64decode(got["data_base64"])
    return steps, {
        "listed": [row["subject"] for row in page["messages"]],
        "bodies": len(messages),
        "attachment": (got["attachment"]["filename"], hashlib.sha256(data).hexdigest()[:16]),
    }


async def peer_task(server: Server) -> tuple[Timings, dict[str, Any]]:
    """list_emails_metadata page 1 of 25; get_emails_content of 5; get_attachment_content."""
    steps: Timings = {}
    call = server.client.call_tool
    where = {"account_name": ACCOUNT, "mailbox": server.folder}
    listing = {**where, "page": 1, "page_size": LIST_ROWS, "order": "desc"}
    page = checked(await timed(steps, "list", call("list_emails_metadata", listing)))
    ids = [row["email_id"] for row in page["emails"]]
    content = {**where, "email_ids": ids[:READS]}
    batch = checked(await timed(steps, "read", call("get_emails_content", content)))
    holder = next(m for m in batch["emails"] if m["attachments"])
    fetch = {**where, "email_id": holder["email_id"], "attachment_name": holder["attachments"][0]}
    got = await timed(steps, "attachment", call("get_attachment_content", fetch))
    if got.is_error:
        raise RuntimeError(f"tool error: {got.content!r}"[:2000])
    data = base64.b64decode(got.content[0].resource.blob)
    return steps, {
        "listed": [row["subject"] for row in page["emails"]],
        "bodies": len(batch["emails"]),
        "attachment": (holder["attachments"][0], hashlib.sha256(data).hexdigest()[:16]),
    }


def angelos_params(services: Services, port: int) -> StdioServerParameters:
    """angelos over stdio, its log lines dropped so they cannot interleave with the figures."""
    env = {**os.environ, **services.product_env, "IMAP_PORT": str(port)}
    quiet = 'exec "$0" -m service.cli serve 2>/dev/null'
    return StdioServerParameters(
        command="/bin/sh", args=["-c", quiet, sys.executable], env=env, cwd=str(ROOT)
    )


def peer_env(services: Services, port: int, home: Path, *, best: bool) -> dict[str, str]:
    """The peer's environment: one env-only account on the same mailbox, TLS verified."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),  # its config, metadata index and keyring lookups stay in the run
        # Verification stays on: aioimaplib's default context trusts SSL_CERT_FILE, the run's CA.
        "SSL_CERT_FILE": str(services.ca_file),
        "MCP_EMAIL_SERVER_CREDENTIAL_STORAGE": "plaintext",
        "MCP_EMAIL_SERVER_ACCOUNT_NAME": ACCOUNT,
        "MCP_EMAIL_SERVER_EMAIL_ADDRESS": services.mail_from,
        "MCP_EMAIL_SERVER_USER_NAME": services.username,
        "MCP_EMAIL_SERVER_PASSWORD": services.password,
        "MCP_EMAIL_SERVER_IMAP_HOST": services.imap_host,
        "MCP_EMAIL_SERVER_IMAP_PORT": str(port),
        "MCP_EMAIL_SERVER_IMAP_SSL": "true",
        "MCP_EMAIL_SERVER_IMAP_VERIFY_SSL": "true",
        "MCP_EMAIL_SERVER_SMTP_HOST": services.smtp_host,
        "MCP_EMAIL_SERVER_SMTP_PORT": str(services.smtp_port),
        "MCP_EMAIL_SERVER_SMTP_SSL": "true",
        # Off by default; the workload cannot fetch an attachment without it, so both runs set it.
        "MCP_EMAIL_SERVER_ENABLE_ATTACHMENT_CONTENT": "true",
    }
    return {**env, **PEER_BEST} if best else env


def peer_params(command: Path, env: dict[str, str]) -> StdioServerParameters:
    """The peer over stdio, its log lines dropped like angelos's."""
    quiet = 'exec "$0" stdio 2>/dev/null'
    return StdioServerParameters(
        command="/bin/sh", args=["-c", quiet, str(command)], env=env, cwd=env["HOME"]
    )


async def discovery(params: StdioServerParameters) -> tuple[int, int]:
    """(tools, bytes) of the complete tools/list result as the server sends it, compact JSON."""
    proc = await asyncio.create_subprocess_exec(
        params.command, *params.args, env=params.env, cwd=params.cwd,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, limit=16 * 1024 * 1024,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    next_id = 0

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        nonlocal next_id
        next_id += 1
        line = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(line).encode() + b"\n")
        await proc.stdin.drain()
        while True:
            answer = json.loads(await proc.stdout.readline())
            if answer.get("id") == next_id:
                return dict(answer["result"])

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        await request("initialize", {**hello, "clientInfo": {"name": "bench", "version": "0"}})
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        tools: list[Any] = []
        total = 0
        cursor: dict[str, Any] = {}
        while True:  # every page, should a server paginate
            result = await request("tools/list", cursor)
            total += len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode())
            tools += result["tools"]
            if not result.get("nextCursor"):
                return len(tools), total
            cursor = {"cursor": result["nextCursor"]}
    finally:
        proc.stdin.close()
        await proc.wait()


def ms(seconds: float) -> str:
    """Format seconds as milliseconds."""
    return f"{seconds * 1000:,.1f} ms"


def median_of(server: Server, step: str) -> float:
    """The median of one step (or "round", their sum) over the warm rounds."""
    if step == "round":
        return statistics.median(sum(r.values()) for r in server.rounds)
    return statistics.median(r[step] for r in server.rounds)


async def compare(
    services: Services, command: Path, folder: str, rounds: int, rtt_ms: float
) -> None:
    """Start angelos and both peers, then run their tasks in turns and print the figures."""
    with contextlib.ExitStack() as proxies:
        proxy = None
        if rtt_ms:
            delay = rtt_ms / 2000  # one way
            proxy = proxies.enter_context(CountingProxy("127.0.0.1", services.imap_port, delay))
        port = proxy.port if proxy else services.imap_port
        witness = Witness(services.dovecot_log, proxy)
        with tempfile.TemporaryDirectory() as plain, tempfile.TemporaryDirectory() as tuned:
            plain_env = peer_env(services, port, Path(plain), best=False)
            tuned_env = peer_env(services, port, Path(tuned), best=True)
            configs = [
                ("angelos", angelos_params(services, port), "auto", angelos_task),
                ("peer, defaults", peer_params(command, plain_env), "legacy", peer_task),
                ("peer at its best", peer_params(command, tuned_env), "legacy", peer_task),
            ]
            if not rtt_ms:
                print("\ndiscovery (complete tools/list result, compact JSON as sent):")
                for name, params, _, _ in configs[:2]:
                    count, size = await discovery(params)
                    print(f"  {name.split(',')[0]:<8} {count:>3} tools, {size:>7,} bytes")
            async with contextlib.AsyncExitStack() as stack:
                servers = [
                    Server(
                        name,
                        await stack.enter_async_context(Client(params, mode=mode)),
                        task,
                        folder,
                    )
                    for name, params, mode, task in configs
                ]
                await run_rounds(servers, witness, services.username, rounds)
    report(servers, rounds, rtt_ms)


async def run_rounds(servers: list[Server], witness: Witness, user: str, rounds: int) -> None:
    """A cold round and a warm-up round each, then `rounds` rounds in rotating order."""
    for server in servers:  # cold: the first task after start, the peer's cache empty
        server.cold, server.seen = await server.run(server)
    for server in servers:
        await server.run(server)
    for r in range(rounds):
        order = servers[r % 3 :] + servers[: r % 3]  # nobody always goes first
        for server in order:
            witness.mark()
            steps, seen = await server.run(server)
            server.io.append(await witness.count(user))
            server.rounds.append(steps)
            assert seen == server.seen, (server.name, seen, server.seen)


def report(servers: list[Server], rounds: int, rtt_ms: float) -> None:
    """Print cold rounds, warm medians per step and round, ratios, and IMAP traffic."""
    base = servers[0]
    path = (
        f"every IMAP connection through a proxy adding {rtt_ms:g} ms round trip"
        if rtt_ms
        else "loopback IMAP"
    )
    print(f"\n== {path}; {rounds} warm rounds each, in turns ==")
    same = all(s.seen == base.seen for s in servers)
    name, digest = base.seen["attachment"]
    print(
        f"same task on both: the newest {LIST_ROWS} listed in the same order, "
        f"{base.seen['bodies']} bodies read, attachment {name} (sha256 {digest}...) "
        f"{'identical on all three' if same else 'DIFFERS'}"
    )
    print("cold (first task after start; the peer's metadata cache empty):")
    for s in servers:
        parts = ", ".join(f"{step} {ms(s.cold[step])}" for step in STEPS)
        print(f"  {s.name:<17} round {ms(sum(s.cold.values())):>11}  ({parts})")
    print("warm medians (ratio peer / angelos):")
    header = "".join(f"{step:>22}" for step in (*STEPS, "round"))
    print(f"  {'':<17}{header}")
    for s in servers:
        cells = ""
        for step in (*STEPS, "round"):
            value = median_of(s, step)
            ratio = "" if s is base else f" {value / median_of(base, step):5.1f}x"
            cells += f"{ms(value) + ratio:>22}"
        print(f"  {s.name:<17}{cells}")
    print("IMAP per warm round (median): logins, connections")
    for s in servers:
        logins = statistics.median(i for i, _ in s.io)
        conns = statistics.median(c for _, c in s.io)
        print(f"  {s.name:<17} {logins:g} logins, {conns:g} connections")
    best = median_of(servers[2], "round") / median_of(base, "round")
    verdict = "met" if best >= 10 else "MISSED"
    print(
        f"target: angelos >= 10x faster per round than the peer at its best: {best:.1f}x, {verdict}"
    )


def main() -> int:
    """Install the peer if needed, seed the corpus, and compare at loopback and at 20 ms."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="warm rounds per server and latency")
    parser.add_argument(
        "--rtt-ms", type=float, default=20.0, help="the second run's added round trip"
    )
    args = parser.parse_args()
    services = services_from_env()
    if services is None:
        print("run under scripts/test-services run -- ...", file=sys.stderr)
        return 2
    command = ensure_peer()
    folder = asyncio.run(seed(services))
    print(f"corpus: {CORPUS} messages in one folder, every {ATTACH_EVERY}th with a 24 KB PDF")
    print(
        "task per round: list the newest 25, read 5 of them in full, fetch one attachment.\n"
        "  angelos: mail_query search (limit 25), read_many (detail full), attachment (index).\n"
        "  peer: list_emails_metadata (page 1, page_size 25), get_emails_content (5 ids),\n"
        "  get_attachment_content (by file name; off by default, so on in both peer runs).\n"
        "  The semantics differ: angelos answers with exact references (folder, UIDVALIDITY,\n"
        "  UID) and a cursor; the peer pages by page number and names messages by bare UID."
    )
    print(
        "peer at its best: "
        + ", ".join(f"{k.removeprefix('MCP_EMAIL_SERVER_')}={v}" for k, v in PEER_BEST.items())
    )
    for rtt_ms in (0.0, args.rtt_ms):
        asyncio.run(compare(services, command, folder, args.rounds, rtt_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
