"""No call holds the server's event loop: the stall probe of bench/stall.py, with a 1 s bound.

One real `angelos serve --transport http` answers the heaviest case of each kind (every
operation at its input limits, reads of hostile stored messages) while a second MCP client
pings `mail_query capabilities` every 50 ms from its own process. The bench's target is
100 ms; this bound is generous so the test holds on a loaded machine and still catches a
parser that turns quadratic (those held the loop for seconds to minutes).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from faults.harness import Server

from support.services import Services
from support.stall_cases import cases, drop, heavy_names, seed
from support.stall_probe import Outcome, run_cases, server_env

pytestmark = pytest.mark.services
BOUND_S = 1.0
CALL_LIMIT_S = 60.0  # a regressed parser holds the loop for minutes: fail instead of waiting


async def probe(services: Services, log: Path) -> dict[str, Outcome]:
    """Seed the hostile mail, serve, run every heavy case under the pinger; clean up."""
    seeded = await seed(services)
    server = Server(server_env(services.product_env), log)
    try:
        await asyncio.to_thread(server.wait_ready)
        chosen = [case for case in cases(seeded) if case.heavy]
        _, measured = await run_cases(server.url, chosen, limit_s=CALL_LIMIT_S)
        return {outcome.name: outcome for outcome in measured}
    finally:
        server.stop()
        await drop(services, seeded)


@pytest.fixture(scope="module")
def outcomes(services: Services, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return asyncio.run(probe(services, tmp_path_factory.mktemp("stall") / "server.log"))


@pytest.mark.parametrize("name", heavy_names())
def test_the_call_reaches_its_expected_result(outcomes: dict[str, Outcome], name: str) -> None:
    outcome = outcomes[name]
    assert outcome.expected == outcome.code


@pytest.mark.parametrize("name", heavy_names())
def test_no_ping_waits_a_second_during_the_call(outcomes: dict[str, Outcome], name: str) -> None:
    outcome = outcomes[name]
    assert 0 == outcome.failed_pings
    assert outcome.pings > 0
    assert outcome.worst_s <= BOUND_S, f"worst ping {outcome.worst_s * 1000:.0f} ms"
