"""Start `angelos serve` as a real subprocess for protocol tests, and always stop it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

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


@contextlib.contextmanager
def http_server(env: Mapping[str, str], *extra_args: str) -> Iterator[str]:
    """Run `angelos serve --transport http` on a free port; yield its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        angelos_command(
            "serve",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *extra_args,
        ),
        env=clean_env(env),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
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
