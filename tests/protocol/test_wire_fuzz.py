"""Raw-wire fuzzing: thousands of generated messages on the stdio pipe and as HTTP POSTs to /mcp.

One server process per transport serves every example; its IMAP goes through a counting proxy.
Each example writes a batch of generated probes (support/wire_probes.py), then a valid call:
every answer must be the one its probe is owed (JSON-RPC codes matched by id), carry no stack
trace or exception text, and the valid call must be answered. At the end: at least 5,000
messages per transport, no mailbox connection, and every stderr line one JSON object.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from support.angelos_process import ROOT, angelos_command, clean_env, http_server
from support.counting_proxy import CountingProxy
from support.wire_answers import (
    ERAS,
    Key,
    answer_key,
    http_expected,
    json_log_lines,
    key,
    stdio_expected,
    tally,
)
from support.wire_probes import MAX_VALUES, Probe, probes, unique_ids

EXAMPLES = int(os.environ.get("ANGELOS_WIRE_FUZZ_EXAMPLES", "400"))
MIN_MESSAGES = 5000 if "ANGELOS_WIRE_FUZZ_EXAMPLES" not in os.environ else 1
MIB = 1024 * 1024
# No shrinking: the server is shared, so a failed example leaves it mid-conversation and
# replays would not reproduce; the failing batch is reported whole.
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
batches = st.lists(probes, min_size=13, max_size=20).filter(unique_ids)
# Every kind of message the issue lists, by the category names of support/wire_probes.py.
CATEGORIES = {
    "malformed JSON", "invalid UTF-8", "wrong shape", "batch", "unknown method",
    "notification with an id", "huge number", "deep nesting", "many values", "oversized",
    "bad params", "notification", "response", "valid", "blank",
}  # fmt: skip
FOLDERS_CALL = {"name": "mail_query", "arguments": {"action": "folders"}}


def ping(request_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode()


def padded_ping(request_id: str, size: int) -> bytes:
    """A valid ping of exactly `size` bytes (one big string parameter)."""
    head = b'{"jsonrpc":"2.0","id":"%s","method":"ping","params":{"pad":"' % request_id.encode()
    return head + b"x" * (size - len(head) - 3) + b'"}}'


@pytest.fixture(scope="module")
def imap_proxy(services: Any) -> Iterator[CountingProxy]:
    with CountingProxy("127.0.0.1", int(services.imap_port)) as proxy:
        yield proxy


def proxied_env(services: Any, proxy: CountingProxy) -> dict[str, str]:
    return {**services.product_env, "IMAP_PORT": str(proxy.port)}


def check_log(log_file: Path) -> None:
    events = json_log_lines(log_file.read_text())
    assert [] == [e for e in events if e["level"] in ("error", "critical")]


class StdioServer:
    """`angelos serve --transport stdio` with a thread that turns stdout lines into a queue."""

    def __init__(self, env: dict[str, str], stderr: IO[bytes]) -> None:
        self.proc = subprocess.Popen(
            angelos_command("serve", "--transport", "stdio"),
            env=clean_env(env), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=stderr,
        )  # fmt: skip
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answers(self, count: int) -> list[dict[str, Any]]:
        """The next `count` answers (10 s at most for all)."""
        deadline = time.monotonic() + 10
        out = []
        for _ in range(count):
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            out.append(json.loads(line))
        return out

    def exchange(self, lines: list[bytes], expected: list[Key | None]) -> None:
        """Write lines, then check that exactly the expected answers come back."""
        self.write(b"".join(line + b"\n" for line in lines))
        wanted = tally(expected)
        got = Counter(answer_key(a) for a in self.answers(sum(wanted.values())))
        assert wanted == got
        assert self.lines.empty(), "an answer nobody was owed"

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(30)
        finally:
            self.proc.kill()
            self._reader.join(10)


@pytest.fixture(scope="module")
def stdio(
    services: Any, imap_proxy: CountingProxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[StdioServer, Path]]:
    log_file = tmp_path_factory.mktemp("stdio") / "stderr.log"
    with log_file.open("wb") as err:
        server = StdioServer(proxied_env(services, imap_proxy), err)
        try:
            init = {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "wire-fuzz", "version": "0"}}  # fmt: skip
            server.write(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                                     "params": init}).encode() + b"\n")  # fmt: skip
            assert "init" == server.answers(1)[0]["id"]
            server.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            yield server, log_file
        finally:
            assert 0 == server.close()


def test_generated_messages_on_the_stdio_pipe_get_their_json_rpc_answers(
    stdio: tuple[StdioServer, Path], imap_proxy: CountingProxy
) -> None:
    server, log_file = stdio
    connections = imap_proxy.snapshot()[0]
    written: Counter[str] = Counter()
    started = time.perf_counter()
    edge_cases = [  # sizes around the 8 MiB limit, written once
        (padded_ping("at-limit", 8 * MIB), key("at-limit", "result")),
        (padded_ping("over", 8 * MIB + 1), key(None, -32700)),
        (b"[" * (3 * 8 * MIB), key(None, -32700)),
        (b"[" + b"0," * MAX_VALUES + b"0]", key(None, -32700)),
    ]
    for raw, expected in edge_cases:
        server.exchange([raw, ping("live")], [expected, key("live", "result")])
        written["oversized"] += 1

    @FUZZ_SETTINGS
    @given(batches)
    def run(batch: list[Probe]) -> None:
        live = f"live-{sum(written.values())}"
        expected = [stdio_expected(p) for p in batch] + [key(live, "result")]
        server.exchange([p.raw for p in batch] + [ping(live)], expected)
        written.update(p.category for p in batch)

    run()
    elapsed = time.perf_counter() - started
    total = sum(written.values())
    print(f"stdio: {total} messages in {elapsed:.1f} s: {dict(written.most_common())}")
    assert total >= MIN_MESSAGES
    assert CATEGORIES <= set(written)
    assert connections == imap_proxy.snapshot()[0], "an invalid message reached the mailbox"
    check_log(log_file)


def test_a_valid_tool_call_on_the_same_stdio_server_does_reach_the_mailbox(
    stdio: tuple[StdioServer, Path], imap_proxy: CountingProxy
) -> None:
    # The witness works: the proxy sees the connection a real call makes.
    server, _ = stdio
    before = imap_proxy.snapshot()[0]
    call = {"jsonrpc": "2.0", "id": "folders", "method": "tools/call", "params": FOLDERS_CALL}
    server.write(json.dumps(call).encode() + b"\n")
    (answer,) = server.answers(1)
    assert ("folders", False) == (answer["id"], answer["result"]["isError"])
    assert imap_proxy.snapshot()[0] > before


def test_a_stream_cut_in_the_middle_of_a_message_is_answered_and_ends_cleanly(
    services: Any, tmp_path: Path
) -> None:
    # Closing stdin ends the session (requests still in flight are dropped with it), so the
    # cut message is the last thing written.
    log_file = tmp_path / "stderr.log"
    with log_file.open("wb") as err:
        server = StdioServer(dict(services.product_env), err)
        server.write(ping("first") + b"\n")
        assert "first" == server.answers(1)[0]["id"]
        server.write(ping("cut")[:20])
        assert 0 == server.close()
    parse_error = {"code": -32700, "message": "Parse error"}
    assert {"jsonrpc": "2.0", "id": None, "error": parse_error} == json.loads(server.lines.get())
    assert server.lines.empty()
    check_log(log_file)


class HttpClient:
    """Raw POSTs over one keep-alive connection, reopened when the server closes it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        for attempt in (1, 2):
            try:
                self.conn.request("POST", "/mcp", body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def headers(self, era: str | None) -> dict[str, str]:
        base = {
            "Host": f"127.0.0.1:{self.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        return base if era is None else {**base, "MCP-Protocol-Version": era}

    def check(self, body: bytes, era: str | None, expected: tuple[int, Key | None]) -> None:
        status, answer = self.post(body, self.headers(era))
        got = answer_key(json.loads(answer)) if answer else None
        assert expected == (status, got), answer[:300]


@pytest.fixture(scope="module")
def http_port(
    services: Any, imap_proxy: CountingProxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, Path]]:
    log_file = tmp_path_factory.mktemp("http") / "stderr.log"
    env = proxied_env(services, imap_proxy)
    with (
        log_file.open("wb") as err,
        http_server(env, "--insecure-local-owner", "fuzz", stderr=err) as base,
    ):
        yield int(base.rsplit(":", 1)[1]), log_file


def test_generated_messages_posted_to_mcp_get_their_json_rpc_answers(
    http_port: tuple[int, Path], imap_proxy: CountingProxy
) -> None:
    port, log_file = http_port
    client = HttpClient(port)
    connections = imap_proxy.snapshot()[0]
    written: Counter[str] = Counter()
    started = time.perf_counter()
    edge_cases = [
        (padded_ping("at-limit", 8 * MIB), (200, key("at-limit", "result"))),
        (padded_ping("over", 8 * MIB + 1), (413, key(None, -32700))),
        (b"[" * (8 * MIB), (400, key(None, -32700))),
        (b"[" + b"0," * MAX_VALUES + b"0]", (400, key(None, -32700))),
    ]
    for raw, expected in edge_cases:
        client.check(raw, None, expected)
        written["oversized"] += 1
    for cut in (b"Content-Length: 100\r\n\r\n" + b"{" * 50, b"Content-Le"):  # truncated streams
        with socket_to(port) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port + cut)
        written["truncated stream"] += 1
        client.check(ping("live"), None, (200, key("live", "result")))

    @FUZZ_SETTINGS
    @given(st.lists(st.tuples(probes, st.sampled_from(ERAS)), min_size=13, max_size=20).filter(
        lambda pairs: unique_ids([p for p, _ in pairs])))  # fmt: skip
    def run(batch: list[tuple[Probe, str | None]]) -> None:
        for probe, era in batch:
            client.check(probe.raw, era, http_expected(probe, era))
        live = f"live-{sum(written.values())}"
        client.check(ping(live), None, (200, key(live, "result")))
        written.update(p.category for p, _ in batch)

    run()
    elapsed = time.perf_counter() - started
    total = sum(written.values())
    print(f"http: {total} messages in {elapsed:.1f} s: {dict(written.most_common())}")
    assert total >= MIN_MESSAGES
    assert CATEGORIES | {"truncated stream"} <= set(written)
    assert connections == imap_proxy.snapshot()[0], "an invalid message reached the mailbox"
    check_log(log_file)


def test_a_valid_tool_call_on_the_same_http_server_does_reach_the_mailbox(
    http_port: tuple[int, Path], imap_proxy: CountingProxy
) -> None:
    client = HttpClient(http_port[0])
    before = imap_proxy.snapshot()[0]
    call = {"jsonrpc": "2.0", "id": "folders", "method": "tools/call", "params": FOLDERS_CALL}
    status, body = client.post(json.dumps(call).encode(), client.headers("2025-11-25"))
    assert (200, False) == (status, json.loads(body)["result"]["isError"])
    assert imap_proxy.snapshot()[0] > before


def socket_to(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)
