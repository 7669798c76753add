"""What the fault tests share: real `angelos serve` processes to kill or pause, the ledger CLI,
MCP calls over HTTP, and a private Redis (AOF, appendfsync always) that can be killed and
restarted on the same data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mcp import Client

from support.angelos_process import ROOT, angelos_command, clean_env, free_port
from support.services import Services

# Test-build timings: every bound is relaxed to 1 s, but the grace must still
# exceed SEND_DISPATCH_DEADLINE_S + SEND_DISPATCHER_LEASE_MS + 60 s, so 6 + 1 + 60 < 68.
FAST = {
    "ANGELOS_ALLOW_FAULT_INJECTION": "1",
    "ANGELOS_ENV": "test",
    "SMTP_DATA_TERMINATION_TIMEOUT_S": "2",
    "SEND_DISPATCH_DEADLINE_S": "6",
    "SEND_DISPATCHER_LEASE_MS": "1000",
    "SEND_DISPATCHER_LEASE_REFRESH_MS": "300",
    "SEND_RECOVERY_GRACE_S": "68",
    "SEND_RECOVERY_INTERVAL_S": "1",
}
GRACE_MS = 68_000
OWNER = "fault-owner"
FAULT_SERVER = Path(__file__).with_name("fault_server.py")


def _through_fault_server(env: Mapping[str, str]) -> bool:
    """Whether `angelos` must start through fault_server.py: to install the fault's checkpoint
    (TEST_FAULT_POINT), or to reroute the pinned hosts of a Graph deployment to the test's
    doubles (TEST_PINNED_ROUTES)."""
    return "TEST_FAULT_POINT" in env or "TEST_PINNED_ROUTES" in env


def server_env(services: Services, namespace: str, **extra: str) -> dict[str, str]:
    """The environment of one server (and of the CLI for the same ledger)."""
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "MAIL_ENABLE_WRITES": "1",
        "ANGELOS_LOCAL_SCOPES": "mail.read mail.write mail.send",
        "SEND_LEDGER_NAMESPACE": namespace,
        **FAST,
        **extra,
    }


class Server:
    """One `angelos serve --transport http` process that a test may kill, stop or resume."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("wb")
        command = angelos_command(
            "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(self.port),
            "--insecure-local-owner", OWNER,
        )  # fmt: skip
        if _through_fault_server(env):
            command[1:3] = [str(FAULT_SERVER)]
        self.proc = subprocess.Popen(
            command,
            env=clean_env(env),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    @property
    def url(self) -> str:
        """Return the MCP endpoint."""
        return f"{self.base}/mcp"

    def wait_ready(self, within: float = 120) -> None:
        """Block until /healthz answers (or raise with the server's log)."""
        deadline = time.monotonic() + within
        while True:
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"angelos did not start: {self.log()[-2000:]}") from None
                time.sleep(0.05)

    def log(self) -> str:
        """Return the server's stderr so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def state(self) -> str:
        """Return the kernel's process state letter (R, S, T when stopped, Z, or X when gone)."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return "X"
        return stat.rsplit(")", 1)[1].split()[0]

    async def wait_state(self, wanted: str, within: float) -> bool:
        """Poll until the process is stopped ("T") or dead ("dead"); False on timeout."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if wanted == "dead" and self.proc.poll() is not None:
                return True
            if wanted == "T" and self.state() == "T":
                return True
            await asyncio.sleep(0.05)
        return False

    def resume(self) -> None:
        """SIGCONT a stopped server."""
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the server whatever its state (resume first so SIGTERM is handled)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def _serve_args(port: int) -> list[str]:
    return ["serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port),
            "--insecure-local-owner", OWNER]  # fmt: skip


def start_servers(envs: list[Mapping[str, str]], log_dir: Path) -> list[Server]:
    """Start several servers at once and wait for all of them."""
    servers = [Server(env, log_dir / f"server-{n}.log") for n, env in enumerate(envs)]
    try:
        for server in servers:
            server.wait_ready()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


async def call(url: str, tool: str, arguments: dict[str, Any], within: float = 30) -> Any:
    """One MCP tool call over stateless HTTP; returns the structured content (errors included)."""
    async with asyncio.timeout(within), Client(url) as client:
        result = await client.call_tool(tool, arguments)
    return result.structured_content


async def prepare(url: str, rcpt: str) -> dict[str, Any]:
    """mail_prepare a small message to one recipient."""
    body = await call(
        url,
        "mail_prepare",
        {"action": "new", "message": {"to": [rcpt], "subject": "Fault", "text": "Hello"}},
    )
    assert body.get("status") == "prepared", body
    return dict(body)


async def confirm(url: str, preview: dict[str, Any], append_sent: bool = False) -> Any:
    """mail_send_confirmed for a preview."""
    return await call(
        url,
        "mail_send_confirmed",
        {
            "prepared_id": preview["prepared_id"],
            "confirmed_digest": preview["digest"],
            "append_sent": append_sent,
        },
        within=120,
    )


async def status(url: str, pid: str) -> dict[str, Any]:
    """send_status of one prepared_id."""
    return dict(await call(url, "mail_query", {"action": "send_status", "prepared_id": pid}))


def ledger_cli(
    env: Mapping[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `angelos ledger …` with the servers' environment."""
    command = angelos_command("ledger", *args)
    if "TEST_PINNED_ROUTES" in env:  # a Graph deployment's command may reach the doubles
        command[1:3] = [str(FAULT_SERVER)]
    return subprocess.run(
        command,
        env=clean_env(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ledger_json(env: Mapping[str, str], *args: str) -> Any:
    """Run a ledger command with --json and decode its output."""
    done = ledger_cli(env, *args, "--json")
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


# ------------------------------------------------------------------------------ private Redis


class PrivateRedis:
    """A redis-server of our own (AOF, appendfsync always) that a test may SIGKILL and restart."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Return its redis:// URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart) on the same data directory and wait until it answers."""
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--maxmemory-policy",
                "noeviction",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ping = subprocess.run(
                ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
            )
            if ping.stdout.strip() == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def kill(self) -> None:
        """SIGKILL it (a crash: only what the AOF holds survives)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        """Stop it for good."""
        self.kill()


def _redis_args(port: int, directory: Path) -> list[str]:
    return ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--appendonly", "yes",
            "--appendfsync", "always", "--save", "", "--maxmemory-policy", "noeviction",
            "--dir", str(directory)]  # fmt: skip


@contextlib.contextmanager
def private_redis(directory: Path) -> Iterator[PrivateRedis]:
    """A started PrivateRedis that is always killed afterwards."""
    server = PrivateRedis(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
