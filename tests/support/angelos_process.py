"""Start `angelos serve` as a real subprocess for protocol tests, and always stop it."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """Return a free loopback TCP port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def angelos_command(*args: str) -> list[str]:
    """The command line that runs this checkout's `angelos`."""
    return [sys.executable, "-m", "service.cli", *args]


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """A process environment with only the system basics plus the given variables."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {**keep, "PYTHONPATH": str(ROOT), **extra}


def connect_address(bind_host: str) -> str:
    """The address a client dials for a server bound to `bind_host` (URL form for IPv6)."""
    if bind_host == "localhost":
        return "127.0.0.1"
    address = ipaddress.ip_address(bind_host)
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


@contextlib.contextmanager
def http_server(
    env: Mapping[str, str],
    *extra_args: str,
    host: str = "127.0.0.1",
    stderr: IO[bytes] | int = subprocess.PIPE,
) -> Iterator[str]:
    """Run `angelos serve --transport http` on a free port; yield its base URL.

    With the default stderr=PIPE nobody reads the pipe while serving: pass a file for runs
    that log more than a pipe holds (64 KiB).
    """
    port = free_port()
    proc = subprocess.Popen(
        angelos_command(
            "serve", "--transport", "http", "--host", host, "--port", str(port), *extra_args
        ),
        env=clean_env(env),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    base = f"http://{connect_address(host)}:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                    break
            except urllib.error.HTTPError:
                break  # it answered (first-party mode refuses a loopback Host with 400)
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else "(see stderr)"
                    raise RuntimeError(f"angelos http did not start: {err[-2000:]}") from None
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stderr:
            proc.stderr.close()
