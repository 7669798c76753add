"""Event-loop stall benchmark: the worst ping latency while each operation runs at its limits.

Run under the test peers:  scripts/test-services run -- .venv/bin/python bench/stall.py
One `angelos serve --transport http` serves two MCP clients on loopback: this process drives
each case (every operation at each input limit, and reads of hostile stored messages) one call
at a time, while a second process pings `mail_query capabilities` every 50 ms. The worst ping
latency overlapping a call is how long that call held the server's event loop (target: at most
100 ms in every case). The cases and the probe live in tests/support/stall_*.py, shared with
the regression test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from faults.harness import Server  # noqa: E402

from support.services import services_from_env  # noqa: E402
from support.stall_cases import MAX_BODY, cases, drop, seed  # noqa: E402
from support.stall_probe import Outcome, run_cases, server_env  # noqa: E402

TARGET_MS = 100


def report(outcome: Outcome) -> None:
    """Print one case's line as soon as it is measured."""
    mark = "" if outcome.as_expected else f"  (expected {outcome.expected})"
    over = " OVER" if outcome.worst_s * 1000 > TARGET_MS else ""
    print(
        f"{outcome.worst_s * 1000:9.1f} {outcome.call_s * 1000:9.1f} {outcome.pings:6d}"
        f"  {outcome.kind:8s} {outcome.name} -> {outcome.code}{mark}{over}",
        flush=True,
    )


async def main_async(args: argparse.Namespace) -> int:
    services = services_from_env()
    if services is None:
        print("run under scripts/test-services run -- ...", file=sys.stderr)
        return 2
    started = time.monotonic()
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    seeded = await seed(services)
    print(f"seeded the hostile messages in {time.monotonic() - started:.1f} s")
    chosen = [
        case
        for case in cases(seeded, args.html_bytes)
        if not args.only or any(word in case.name for word in args.only)
    ]
    extra = dict(item.split("=", 1) for item in args.server_env)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(args.log) if args.log else Path(tmp) / "server.log"
        server = Server({**server_env(services.product_env), **extra}, log)
        try:
            server.wait_ready()
            print("worst ms   call ms  pings  kind     case -> result")
            idle, outcomes = await run_cases(server.url, chosen, args.runs, report)
        finally:
            server.stop()
            await drop(services, seeded)
    over = [o for o in outcomes if o.worst_s * 1000 > TARGET_MS]
    unexpected = [o for o in outcomes if not o.as_expected]
    failed = sum(o.failed_pings for o in outcomes)
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"\nidle ping: median {idle[0] * 1000:.1f} ms, worst {idle[1] * 1000:.1f} ms")
    print(f"{len(outcomes)} cases, {len(over)} over the {TARGET_MS} ms target; worst "
          f"{max(o.worst_s for o in outcomes) * 1000:.1f} ms; {failed} failed pings; "
          f"{len(unexpected)} unexpected results")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2, help="calls per case (worst kept)")
    parser.add_argument("--html-bytes", type=int, default=MAX_BODY,
                        help="size of the authored-HTML cases (the limit is 1 MiB)")  # fmt: skip
    parser.add_argument("--only", nargs="*", default=[], help="cases whose name has a word")
    parser.add_argument("--log", help="keep the server's log (stderr) in this file")
    parser.add_argument(
        "--server-env",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment of the server, e.g. PYTHONASYNCIODEBUG=1",
    )
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
