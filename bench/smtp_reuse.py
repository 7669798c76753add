"""SMTP session reuse: sends over the connection pool versus a fresh connection for each send.

Run under the test peers:  scripts/test-services run -- .venv/bin/python bench/smtp_reuse.py
Both paths submit the same ~9 KiB message, one at a time, to one TLS SMTP server: a sink of
its own (scripts/smtp_sink.py, AUTH PLAIN required, the run's test certificate) that only stores
messages, without the test sink's relay into Dovecot, which alone takes ~40 ms a message here and
would hide what a connection costs. Both stop at the same point: the 250 reply to the
end-of-data marker.
  * pooled: SmtpPool (SMTP_MAX_CONNECTIONS sessions kept after acceptance, RSET before reuse);
  * fresh: SmtpSubmitter (connect, TLS handshake, EHLO, AUTH, then QUIT after every message).
The two alternate in blocks of 10 so that both see the same machine; the sink's log tells how
many connections each used. It prints the total time, per-send p50 and p95 of both, the CPU
this process and the sink spent per send, and the ratio fresh/pooled (target >= 3x).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from figures import pct  # noqa: E402

from providers.smtp import SmtpPool, SmtpSettings, SmtpSubmitter  # noqa: E402
from schemas.secret import Secret  # noqa: E402
from schemas.submission import Envelope  # noqa: E402
from support.services import services_from_env  # noqa: E402
from support.smtp_sink import transactions  # noqa: E402

BLOCK = 10


def message(sender: str, rcpt: str) -> bytes:
    body = "The quick brown fox jumps over the lazy dog.\r\n" * 200  # ~9 KiB
    return (
        f"From: {sender}\r\nTo: {rcpt}\r\nSubject: reuse bench\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@example.test>\r\n\r\n{body}"
    ).encode()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def storing_sink(services: Any) -> Iterator[tuple[int, Path, int]]:
    """Start a sink that only stores (no relay); yield its port, spool directory and pid."""
    with tempfile.TemporaryDirectory(prefix="smtp-reuse-") as work:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        spool, ready = Path(work) / "spool", Path(work) / "ready"
        env = {k: v for k, v in os.environ.items() if k != "SINK_LMTP"}
        tls = services.dir / "tls"
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "smtp_sink.py"), "--port", str(port),
             "--cert", str(tls / "server.crt"), "--key", str(tls / "server.key"),
             "--spool", str(spool), "--ready", str(ready)],
            env=env, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 20
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the storing sink did not start")
                time.sleep(0.05)
            yield port, spool, proc.pid
        finally:
            proc.terminate()
            proc.wait(10)


async def run(services: Any, sends: int, port: int, spool: Path, sink_pid: int) -> None:
    settings = SmtpSettings(
        host="localhost",
        port=port,
        tls_mode=services.smtp_tls_mode,
        username=services.username,
        password=Secret(services.password),
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
    )
    pool, fresh = SmtpPool(settings, 4), SmtpSubmitter(settings)
    tag = uuid.uuid4().hex[:8]
    times: dict[str, list[float]] = {"pooled": [], "fresh": []}
    cpu = {path: [0.0, 0.0] for path in times}  # this process, the sink

    async def one(path: str, n: int) -> None:
        rcpt = f"{path}{n}@{tag}.example.test"
        envelope, raw = Envelope(services.mail_from, (rcpt,)), message(services.mail_from, rcpt)
        started, ours, theirs = time.perf_counter(), time.process_time(), cpu_seconds(sink_pid)
        if path == "pooled":
            async with pool.slot() as slot:
                submission = await slot.begin(envelope, raw)
                reply = await submission.commit()
        else:
            submission = await fresh.begin(envelope, raw)
            reply = await submission.commit()
        times[path].append(time.perf_counter() - started)
        cpu[path][0] += time.process_time() - ours
        cpu[path][1] += cpu_seconds(sink_pid) - theirs
        assert 250 == reply.code

    await one("pooled", -1)  # warm-up: both paths load TLS state once
    await one("fresh", -1)
    times = {"pooled": [], "fresh": []}
    cpu = {path: [0.0, 0.0] for path in times}
    try:
        for start in range(0, sends, BLOCK):
            for path in ("pooled", "fresh") if start % (2 * BLOCK) == 0 else ("fresh", "pooled"):
                for n in range(start, min(start + BLOCK, sends)):
                    await one(path, n)
    finally:
        await pool.aclose()
    seen = [t for t in transactions(spool) if tag in t.rcpt_tos[0]]
    connections = {
        path: len({t.connection for t in seen if t.rcpt_tos[0].startswith(path)}) for path in times
    }
    total = {path: sum(values) for path, values in times.items()}
    print(f"{sends} sends per path, ~9 KiB each, one at a time, TLS sink with AUTH PLAIN")
    for path, values in times.items():
        print(
            f"{path:6}: total {total[path]:.3f} s, p50 {statistics.median(values) * 1000:.2f} ms, "
            f"p95 {pct(values, 0.95):.2f} ms, max {max(values) * 1000:.1f} ms, "
            f"{connections[path]} connections; CPU per send: "
            f"this process {cpu[path][0] / len(values) * 1000:.2f} ms, "
            f"the sink {cpu[path][1] / len(values) * 1000:.2f} ms"
        )
    p50 = {path: statistics.median(values) for path, values in times.items()}
    print(
        f"ratio fresh/pooled: p50 {p50['fresh'] / p50['pooled']:.2f}x, "
        f"total {total['fresh'] / total['pooled']:.2f}x (target >= 3x)"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=100)
    args = parser.parse_args()
    services = services_from_env()
    if services is None:
        print("run under scripts/test-services run -- ...", file=sys.stderr)
        return 2
    with storing_sink(services) as (port, spool, pid):
        asyncio.run(run(services, args.sends, port, spool, pid))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
