"""Read-path benchmark: the MCP server over stdio versus the same IMAP commands sent directly.

Run under the test peers:  scripts/test-services run -- .venv/bin/python bench/read_path.py
Each round is (search 100 rows, read 10, read_many 10) on a 1,000-message folder. Four paths
alternate round by round in one run: the server over stdio driven by a bare JSON-RPC client
(the server's own cost), the same through mcp's Client (adds the SDK client's pydantic work),
and two direct IMAP clients on one connection each. "Same wire" sends exactly the server's
commands the way the server sends them (a read's EXAMINE and UID FETCH in one round trip, a
search's UID SEARCH behind its EXAMINE, read_many's sizes behind its EXAMINE and then its
messages in one FETCH) through the product's own IMAP session, without MCP or MIME parsing:
the ratio to it is the target (≤ 1.15 with mcp's Client at 2 ms). "aioimaplib" sends them
one at a time, as a script on that library would; it is printed for scale.
A second part reports the peak RSS of a server process answering read_many of ten messages
near 5 MiB (target ≤ 150 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import aioimaplib
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from providers.imap import codec  # noqa: E402
from providers.imap.connect import connect  # noqa: E402
from providers.imap.session import ImapSession  # noqa: E402
from service.app import imap_settings  # noqa: E402
from service.config import load_config  # noqa: E402
from support.counting_proxy import CountingProxy  # noqa: E402
from support.imap import Append, append_messages, close_session, open_session  # noqa: E402
from support.services import services_from_env  # noqa: E402

SUMMARY_ITEMS = (
    "(UID FLAGS INTERNALDATE RFC822.SIZE MODSEQ "
    "BODY.PEEK[HEADER.FIELDS (DATE FROM TO SUBJECT)]<0.65536>)"
)
READ_ITEMS = "(UID FLAGS INTERNALDATE RFC822.SIZE MODSEQ BODY.PEEK[]<0.5242881>)"


def message(i: int, body_bytes: int) -> bytes:
    msg = EmailMessage()
    msg["From"] = f"Sender {i % 17} <sender{i % 17}@example.test>"
    msg["To"] = "alice@example.test"
    msg["Subject"] = f"Benchmark message {i}"
    msg["Date"] = "Mon, 05 Jan 2026 10:00:00 +0000"
    msg["Message-ID"] = f"<bench-{i}-{uuid.uuid4().hex}@example.test>"
    line = f"Line of message {i}: the quick brown fox jumps over the lazy dog.\n"
    msg.set_content(line * max(1, body_bytes // len(line)))
    return msg.as_bytes()


async def seed(
    services: Any, count: int, body_bytes: int, prefix: str
) -> tuple[str, int, list[int]]:
    imap = await open_session(services, command_timeout=120)
    try:
        folder = f"{prefix}-{uuid.uuid4().hex[:8]}"
        await imap.create(f'"{folder}"')
        result = await append_messages(
            imap, folder, [Append(message(i, body_bytes)) for i in range(count)]
        )
        return folder, result.uidvalidity, result.uids
    finally:
        await close_session(imap)


async def examine(imap: aioimaplib.IMAP4_SSL, quoted: str) -> None:
    await imap.examine(quoted)
    imap.protocol.state = aioimaplib.SELECTED  # aioimaplib only sets it after SELECT


async def same_wire_round(session: ImapSession, folder: str, uids: list[int]) -> float:
    """The server's IMAP commands for one round, sent as the server sends them."""
    started = time.perf_counter()
    session.begin_lease()  # search: the window from the UIDNEXT seen last round, behind the EXAMINE
    guess = session.last_uid_next[folder]
    window = codec.raw(f"UID {max(1, guess - 1000)}:{guess - 1}")
    selected, found = await session.examine_and_search(folder, window)
    assert selected.uid_next == guess  # the folder does not grow during the benchmark
    page = found[-100:]
    await session.uid_fetch(page, codec.raw(SUMMARY_ITEMS))
    for uid in page[:10]:  # read x10: each on a fresh lease, EXAMINE and FETCH together
        session.begin_lease()
        await session.examine_and_fetch(folder, [uid], codec.raw(READ_ITEMS))
    session.begin_lease()  # read_many x10: sizes behind the EXAMINE, then the ten in one FETCH
    await session.examine_and_fetch(folder, page[10:20], codec.raw("(UID RFC822.SIZE)"))
    await session.uid_fetch(page[10:20], codec.raw(READ_ITEMS))
    return time.perf_counter() - started


async def direct_round(imap: aioimaplib.IMAP4_SSL, folder: str, uids: list[int]) -> float:
    """The server's IMAP commands for one round, one at a time, through plain aioimaplib."""
    started = time.perf_counter()
    quoted = f'"{folder}"'
    await examine(imap, quoted)
    low, high = uids[-1] - 999, uids[-1]
    found = await imap.uid_search(f"UID {max(1, low)}:{high}", charset=None)
    page = [int(x) for x in found.lines[0].split()][-100:]
    await imap.uid("fetch", ",".join(map(str, page)), SUMMARY_ITEMS)
    for uid in page[:10]:  # read x10
        await examine(imap, quoted)
        await imap.uid("fetch", str(uid), READ_ITEMS)
    await examine(imap, quoted)  # read_many x10 on one connection: one EXAMINE per folder
    for uid in page[10:20]:
        await imap.uid("fetch", str(uid), READ_ITEMS)
    return time.perf_counter() - started


Answer = tuple[dict[str, Any], bool]  # (structured content, is_error)


class SdkCaller:
    """Tool calls through mcp's own Client (pydantic models on the client side too)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, name: str, arguments: dict[str, Any]) -> Answer:
        result = await self.client.call_tool(name, arguments)
        return result.structured_content or {}, result.is_error


class LeanCaller:
    """Tool calls as bare JSON-RPC lines on the server's pipes: the server's cost, little else."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    @classmethod
    async def start(cls, env: dict[str, str]) -> LeanCaller:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "service.cli", "serve", env=env, cwd=str(ROOT),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=64 * 1024 * 1024,
        )  # fmt: skip
        caller = cls(proc)
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        await caller.request(
            "initialize", {**hello, "clientInfo": {"name": "bench", "version": "0"}}
        )
        await caller.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return caller

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            message = json.loads(await self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                return dict(message["result"])

    async def call(self, name: str, arguments: dict[str, Any]) -> Answer:
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        return result.get("structuredContent") or {}, bool(result.get("isError"))

    async def aclose(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def mcp_round(client: SdkCaller | LeanCaller, folder: str) -> float:
    """One round through the MCP server: search 100, read 10, read_many 10."""
    started = time.perf_counter()
    body, failed = await client.call(
        "mail_query", {"action": "search", "search": {"folder": folder, "limit": 100}}
    )
    assert not failed, body
    refs = [
        {"folder": body["folder"], "uid_validity": body["uid_validity"], "uid": row["uid"]}
        for row in body["messages"]
    ]
    for ref in refs[:10]:
        _, failed = await client.call("mail_query", {"action": "read", "reference": ref})
        assert not failed
    _, failed = await client.call("mail_query", {"action": "read_many", "references": refs[10:20]})
    assert not failed
    return time.perf_counter() - started


async def compare(services: Any, rounds: int, folder: str, uids: list[int], rtt_ms: float) -> None:
    """Alternate MCP and direct rounds; with rtt_ms, both go through the same delaying proxy."""
    with CountingProxy("127.0.0.1", services.imap_port, rtt_ms / 2000) as proxy:
        port = proxy.port if rtt_ms else services.imap_port
        await compare_via(services, rounds, folder, uids, port, rtt_ms)


async def compare_via(
    services: Any, rounds: int, folder: str, uids: list[int], port: int, rtt_ms: float
) -> None:
    env = {**os.environ, **services.product_env, "IMAP_PORT": str(port)}
    # The server's log lines (stderr) would interleave with the figures: a shell drops them.
    quiet = 'exec "$0" -m service.cli serve 2>/dev/null'
    target = StdioServerParameters(
        command="/bin/sh", args=["-c", quiet, sys.executable], env=env, cwd=str(ROOT)
    )
    imap = await open_session(replace(services, imap_port=port))
    config = load_config(env)
    assert config.mail is not None
    wire = await connect(imap_settings(config.mail))
    await wire.examine(folder)  # as the server's pooled session has seen the folder before
    names = ("sdk", "lean", "wire", "direct", "call")
    times: dict[str, list[float]] = {name: [] for name in names}
    lean = await LeanCaller.start(env)
    try:
        async with Client(target) as client:
            sdk = SdkCaller(client)
            for _ in range(3):  # warm-up: imports, pooled session, page cache
                await mcp_round(sdk, folder)
                await mcp_round(lean, folder)
                await same_wire_round(wire, folder, uids)
                await direct_round(imap, folder, uids)
            for _ in range(rounds):  # the four paths alternate round by round
                times["sdk"].append(await mcp_round(sdk, folder))
                times["lean"].append(await mcp_round(lean, folder))
                times["wire"].append(await same_wire_round(wire, folder, uids))
                times["direct"].append(await direct_round(imap, folder, uids))
                times["call"] += [await bare_call(lean) for _ in range(CALLS_PER_ROUND)]
    finally:
        await lean.aclose()
        await close_session(imap)
        await wire.logout()
    ms = {name: statistics.median(values) * 1000 for name, values in times.items()}
    wire_ms, direct_ms = ms["wire"], ms["direct"]
    path = f"IMAP through a proxy adding {rtt_ms:g} ms round trip" if rtt_ms else "loopback IMAP"
    print(f"\n{path}; {rounds} rounds of search 100 rows + read 10 + read_many 10")
    print(f"direct, same wire as the server (14 round trips): median {wire_ms:.2f} ms/round")
    print(f"direct, aioimaplib one command at a time (34): median {direct_ms:.2f} ms/round")
    for name, label in (("lean", "bare JSON-RPC client"), ("sdk", "mcp's Client")):
        print(
            f"MCP over stdio, {label}: median {ms[name]:.2f} ms/round, ratio to same wire "
            f"{ms[name] / wire_ms:.2f}x (target <= 1.15x), to aioimaplib "
            f"{ms[name] / direct_ms:.2f}x"
        )
    floor = (wire_ms + CALLS_PER_ROUND * ms["call"]) / wire_ms
    print(
        f"one MCP call that never reaches IMAP (bare client): median {ms['call']:.2f} ms; "
        f"{CALLS_PER_ROUND} calls per round put the transport-only floor at {floor:.2f}x"
    )


CALLS_PER_ROUND = 12  # search + 10 reads + read_many


async def bare_call(client: LeanCaller) -> float:
    """Time one call the server refuses at decoding: the protocol cost without any IMAP."""
    started = time.perf_counter()
    _, failed = await client.call("mail_query", {"action": "folders", "bench": 1})
    assert failed
    return time.perf_counter() - started


async def rss_probe(services: Any) -> None:
    """In a fresh process: read_many of ten messages near 5 MiB, then report peak RSS."""
    folder, uid_validity, uids = await seed(services, 10, 5 * 1024 * 1024 - 64 * 1024, "rss")
    code = (
        "import asyncio, json, sys\n"
        "from service.logging import configure_logging; configure_logging()\n"
        "sys.path[:0] = [sys.argv[1], sys.argv[1] + '/tests']\n"
        "from support.inprocess import mcp_client\n"
        "async def main():\n"
        "    refs = json.loads(sys.argv[2])\n"
        "    async with mcp_client(dict(__import__('os').environ), ('mail.read',)) as (c, _):\n"
        "        r = await c.call_tool('mail_query', {'action': 'read_many', 'references': refs,"
        " 'detail': 'full', 'max_response_bytes': 131072})\n"
        "        assert not r.is_error, r.structured_content\n"
        "        print('BATCH', r.structured_content.get('stop_reason', 'complete'))\n"
        "asyncio.run(main())\n"
        "for line in open('/proc/self/status'):\n"
        "    if line.startswith('VmHWM'): print(line.strip())\n"
    )
    refs = [{"folder": folder, "uid_validity": uid_validity, "uid": u} for u in uids]
    env = {**os.environ, **services.product_env}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code, str(ROOT), json.dumps(refs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout.split()
    peak_kib = int(out[out.index("VmHWM:") + 1])
    ended = out[out.index("BATCH") + 1]
    print(f"read_many of 10 messages of ~5 MiB (full detail): batch ended: {ended}")
    print(f"peak RSS of the server process: {peak_kib / 1024:.1f} MiB (target <= 150 MiB)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--rtt-ms", type=float, default=2.0, help="second run's added round trip")
    args = parser.parse_args()
    services = services_from_env()
    if services is None:
        print("run under scripts/test-services run -- ...", file=sys.stderr)
        return 2
    folder, _, uids = asyncio.run(seed(services, 1000, 3000, "bench"))
    for rtt_ms in (0.0, args.rtt_ms):
        asyncio.run(compare(services, args.rounds, folder, uids, rtt_ms))
    asyncio.run(rss_probe(services))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
