"""Ledger overhead around a send: the full dispatch pipeline versus the same SMTP submission alone.

Run under the test peers:  scripts/test-services run -- .venv/bin/python bench/ledger.py
Each round prepares one message (not timed), then times, alternately:
  * ledger send: Dispatcher.confirm (read, claim, attempt marker, body, commit point,
    terminator, outcome event) against the real Redis (AOF, appendfsync always) and SMTP sink;
  * plain send: the same bytes through the same SMTP connection pool (begin + commit), no
    ledger.
It prints p50/p95 of both, the ratio, and the added latency (target ≤ 5 ms p50). Throughput of
ledger work alone is bench/ledger_core.py.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from figures import pct  # noqa: E402

from ledger.ids import new_id  # noqa: E402
from providers.mime.compose import compose_new  # noqa: E402
from schemas.args.common import Message  # noqa: E402
from schemas.args.prepare import PrepareNew  # noqa: E402
from schemas.submission import Envelope  # noqa: E402
from service.app import build_app  # noqa: E402
from service.config import load_config  # noqa: E402
from service.operations.prepare import identity, now, prepare_new  # noqa: E402
from service.principal import local_principal  # noqa: E402
from support.services import services_from_env  # noqa: E402


async def run(services: Any, rounds: int) -> None:
    env = {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": f"bench{uuid.uuid4().hex[:8]}",
    }
    app = build_app(load_config(env))
    await app.start()
    dispatcher = app.sending.dispatcher
    assert dispatcher is not None, app.sending.reason
    principal = local_principal("bench", ("mail.read", "mail.send"))
    text = "The quick brown fox jumps over the lazy dog.\n" * 200  # ~9 KiB
    ledger_times: list[float] = []
    bare_times: list[float] = []  # the same dispatch without the rollback witness
    plain_times: list[float] = []
    store = app.sending.store
    assert store is not None
    witness = store.witness

    async def dispatch(i: int, with_witness: bool) -> float:
        message = Message(to=[f"bench{i}@example.test"], subject="Bench", text=text)
        preview = await prepare_new(app, principal, PrepareNew(message=message))
        store.witness = witness if with_witness else None
        started = time.perf_counter()
        result = await dispatcher.confirm(
            preview.prepared_id, principal.owner, preview.digest, False
        )
        elapsed = time.perf_counter() - started
        store.witness = witness
        assert getattr(result, "status", "") == "accepted", result
        return elapsed

    try:
        for i in range(rounds + 5):
            ledger_s = await dispatch(i, True)
            bare_s = await dispatch(i, False)
            message = Message(to=[f"bench{i}@example.test"], subject="Bench", text=text)
            # The same message composed again (same size and structure) for the plain path.
            raw = compose_new(
                message, identity=identity(app), prepared_id=new_id(), created_at=now()
            ).raw
            envelope = Envelope(
                mail_from=services.mail_from, recipients=(f"plain{i}@example.test",)
            )
            started = time.perf_counter()
            async with dispatcher.submitter.slot() as slot:
                submission = await slot.begin(envelope, raw)
                await submission.commit()
            plain_s = time.perf_counter() - started
            if i >= 5:  # warm-up rounds are not counted
                ledger_times.append(ledger_s)
                bare_times.append(bare_s)
                plain_times.append(plain_s)
    finally:
        await app.aclose()
    p50_l, p50_p = statistics.median(ledger_times) * 1000, statistics.median(plain_times) * 1000
    print(f"rounds: {rounds}, message ~9 KiB, Redis AOF appendfsync always, SMTP over TLS")
    print(f"ledger send: p50 {p50_l:.2f} ms, p95 {pct(ledger_times, 0.95):.2f} ms")
    print(f"plain send:  p50 {p50_p:.2f} ms, p95 {pct(plain_times, 0.95):.2f} ms")
    print(f"ratio ledger/plain (p50): {p50_l / p50_p:.2f}x")
    print(f"added latency of the ledger (p50): {p50_l - p50_p:.2f} ms (target <= 5 ms)")
    p50_b = statistics.median(bare_times) * 1000
    print(f"of which the rollback witness (one fsync of its file): {p50_l - p50_b:.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    services = services_from_env()
    if services is None:
        print("run under scripts/test-services run -- ...", file=sys.stderr)
        return 2
    asyncio.run(run(services, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
