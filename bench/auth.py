"""Bearer authentication: what it adds to one MCP call, and what the pure verifier costs.

Run under the test peers:  scripts/test-services run -- .venv/bin/python bench/auth.py
Three angelos HTTP services run in this process, each on its own loopback port, over the same
mailbox (Dovecot of the test peers), all built by http_service():
  * bearer: MCP_* configured against a TLS key server on loopback (tests/support); every request
    carries `Authorization: Bearer <token>` (RS256 by default, --alg ES256), whose key the
    service fetched during the warm-up and holds in its cache (one fetch in the whole run);
  * none: the loopback owner's service (--insecure-local-owner), no Authorization header, the
    owner holding the same scopes as the token;
  * control: a second service exactly like `none`, whose difference from `none` shows how much
    two identical sides differ on this machine in this run (the noise floor).
One aiohttp session posts the same request bytes to each over keep-alive connections, with
`Host: localhost:<port>`; only the Authorization header differs. Each method (`tools/list`,
and `mail_query` action `capabilities`, which asks the IMAP pool) runs --calls calls per side,
one at a time, after a warm-up, the sides taking turns in blocks of --block calls (10 by
default: on a shared host, blocks of 100 let the load drift between blocks and two identical
sides differed by up to 170 µs at p50, blocks of 10 by up to 55 µs). Info-level logging is off
on every side. It prints per-call wall time p50/p90 of each side, the difference from `none` in
µs and the ratio, the machine's load average, and then the pure verifier alone (parse_token +
verify_signature, the key in hand) per token for RS256 and ES256.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from figures import pct  # noqa: E402

from service.auth.resource.jwks import parse_jwks  # noqa: E402
from service.auth.resource.jwt import parse_token, verify_signature  # noqa: E402
from service.config import load_config  # noqa: E402
from service.logging import configure_logging  # noqa: E402
from service.transports.serve_http import app_runner, http_service  # noqa: E402
from support.angelos_process import free_port  # noqa: E402
from support.jwks_server import jwks_server  # noqa: E402
from support.resource_server import resource_server  # noqa: E402
from support.services import services_from_env  # noqa: E402
from support.tokens import SCOPE, Minter  # noqa: E402

WARMUP = 200
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
METHODS: dict[str, dict[str, Any]] = {
    "tools/list": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    "mail_query capabilities": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "mail_query", "arguments": {"action": "capabilities"}},
    },
}


def load() -> str:
    """The 1, 5 and 15 minute load averages, as printed."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


class Side:
    """One service to call: its URL and the headers every request to it carries."""

    def __init__(self, port: int, authorization: str | None) -> None:
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.headers = {**HEADERS, "Host": f"localhost:{port}"}
        if authorization is not None:
            self.headers["Authorization"] = authorization

    async def call(self, session: aiohttp.ClientSession, body: bytes) -> float:
        """Post one request and read the whole answer; return its wall time in seconds."""
        started = time.perf_counter()
        async with session.post(self.url, data=body, headers=self.headers) as response:
            answer = await response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200 or b'"isError":true' in answer:
            raise RuntimeError(f"{self.url} answered {response.status}: {answer[:200]!r}")
        return elapsed


async def compare(
    session: aiohttp.ClientSession, sides: dict[str, Side], body: bytes, calls: int, block: int
) -> dict[str, list[float]]:
    """Warm every side up, then time `calls` calls per side, the sides taking turns in blocks."""
    for side in sides.values():
        for _ in range(WARMUP):
            await side.call(session, body)
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn, start in enumerate(range(0, calls, block)):
        shift = turn % len(names)  # each side goes first, second and last equally often
        for name in names[shift:] + names[:shift]:
            for _ in range(min(block, calls - start)):
                times[name].append(await sides[name].call(session, body))
    return times


def us(values: list[float], q: float) -> float:
    """The q-quantile of durations in seconds, in microseconds."""
    return pct(values, q) * 1000


def report(method: str, times: dict[str, list[float]], alg: str) -> None:
    """Print p50/p90 of every side, and each side's difference from `none` and ratio."""
    print(f"{method}: {len(times['none'])} calls per side")
    labels = {"none": "no auth", "control": "no auth (2)", "bearer": f"bearer {alg}"}
    for name, values in times.items():
        p50, p90 = us(values, 0.5), us(values, 0.9)
        print(f"  {labels[name]:12}: p50 {p50:6.0f} µs, p90 {p90:6.0f} µs")
    for name, tag in (("bearer", "added by bearer"), ("control", "control - no auth")):
        parts = []
        for q in (0.5, 0.9):
            bare, other = us(times["none"], q), us(times[name], q)
            parts.append(f"p{round(q * 100)} {other - bare:+5.0f} µs ({other / bare:.3f}x)")
        print(f"  {tag:17}: {', '.join(parts)}")


@contextlib.asynccontextmanager
async def loopback_owner(env: dict[str, str]) -> AsyncIterator[int]:
    """Serve the loopback owner's service (no authentication) on a free port; yield the port."""
    port = free_port()
    local_env = {**env, "ANGELOS_LOCAL_SCOPES": SCOPE}  # the scopes the token grants
    local = http_service(load_config(local_env), "127.0.0.1", port, "bench-owner")
    assert local.app is not None, "the loopback owner's service is unavailable"
    await local.app.start()
    runner = app_runner(local.web_app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port
    finally:
        await runner.cleanup()
        await local.aclose()


async def http_run(services: Any, calls: int, block: int, alg: str) -> None:
    env = services.product_env
    async with (
        loopback_owner(env) as local_port,
        loopback_owner(env) as control_port,
        jwks_server(services.dir / "tls") as jwks,
        resource_server(env, jwks) as server,
        aiohttp.ClientSession() as session,
    ):
        minter = Minter(issuer=jwks.issuer, resource=server.resource)
        jwks.document = minter.jwks()
        token = minter.token(minter.rsa if alg == "RS256" else minter.ec)
        sides = {
            "none": Side(local_port, None),
            "control": Side(control_port, None),
            "bearer": Side(server.port, f"Bearer {token}"),
        }
        print(f"load average before: {load()}; blocks of {block} calls; token {len(token)} bytes")
        for method, request in METHODS.items():
            times = await compare(session, sides, json.dumps(request).encode(), calls, block)
            report(method, times, alg)
        print(f"load average after: {load()}; key fetches in the run: {jwks.fetches}")
        assert 1 == jwks.fetches, "the key was not served from the cache"


def verifier_cost(rounds: int) -> None:
    """Time parse_token + verify_signature per token for each algorithm, the key in hand."""
    minter = Minter()
    keys = parse_jwks(minter.jwks())
    print(f"pure verifier, {rounds} tokens per algorithm (parse + verify, key in hand):")
    for key in (minter.rsa, minter.ec):
        token = minter.token(key)
        parse: list[float] = []
        total: list[float] = []
        for _ in range(rounds):
            now = int(time.time())
            started = time.perf_counter()
            parsed = parse_token(token, minter.rules, now)
            parsed_at = time.perf_counter()
            verify_signature(parsed, keys[parsed.kid])
            ended = time.perf_counter()
            parse.append(parsed_at - started)
            total.append(ended - started)
        print(
            f"  {key.alg}: p50 {us(total, 0.5):5.0f} µs, p90 {us(total, 0.9):5.0f} µs "
            f"(parse alone p50 {us(parse, 0.5):3.0f} µs); token {len(token)} bytes"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per side and method")
    parser.add_argument("--block", type=int, default=10, help="calls per side per turn")
    parser.add_argument("--alg", choices=("RS256", "ES256"), default="RS256")
    parser.add_argument("--rounds", type=int, default=2000, help="tokens per verifier timing")
    args = parser.parse_args()
    services = services_from_env()
    if services is None:
        print("run under scripts/test-services run -- ...", file=sys.stderr)
        return 2
    configure_logging("warning")  # both sides alike: no per-call info line
    asyncio.run(http_run(services, args.calls, args.block, args.alg))
    verifier_cost(args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
