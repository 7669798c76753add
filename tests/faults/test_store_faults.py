"""The store fails, not angelos: Redis crashes, stops, pauses, runs out of memory, loses its
network, or comes back older than it was. Two server processes on one private Redis take a storm
of concurrent confirms through each fault; tests/faults/store_rig.py says what is judged.
Every scenario runs at once (each on its own Redis), then each test reports one of them.
"""

from __future__ import annotations

import pytest
from faults.store_faults import Outcome, run_all

from support.ledger_redis import run_aside
from support.services import Services

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def outcomes(services: Services, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return run_aside(run_all(services, tmp_path_factory.mktemp("store-faults")))


class TestRedisProcessFaults:
    def test_a_crash_and_a_restart_from_the_aof_send_nothing_twice(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["kill -9, restart after 3 s; persist window 1 s"].check()

    def test_a_clean_shutdown_and_a_restart_send_nothing_twice(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["SHUTDOWN, restart after 3 s"].check()

    def test_a_two_second_pause_sends_nothing_twice(self, outcomes: dict[str, Outcome]) -> None:
        outcomes["SIGSTOP 2 s"].check()

    def test_a_forty_second_pause_sends_nothing_twice(self, outcomes: dict[str, Outcome]) -> None:
        outcomes["SIGSTOP 40 s"].check()

    def test_five_seconds_out_of_memory_send_nothing_twice(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["OOM 5 s; persist window 1 s"].check()


class TestNetworkFaults:
    def test_connections_reset_after_a_few_bytes(self, outcomes: dict[str, Outcome]) -> None:
        outcomes["proxy: reset after 512 bytes, 3 s"].check()

    def test_replies_delayed_by_one_and_a_half_seconds(self, outcomes: dict[str, Outcome]) -> None:
        outcomes["proxy: delay 1.5 s, 5 s"].check()

    def test_a_twelve_second_stall(self, outcomes: dict[str, Outcome]) -> None:
        outcomes["proxy: stall 12 s"].check()

    def test_an_eight_second_blackhole(self, outcomes: dict[str, Outcome]) -> None:
        outcomes["proxy: blackhole 8 s"].check()


class TestAStoreThatGoesBackInTime:
    """The store comes back older than it was: what it forgot is never sent again."""

    def test_aof_switched_off_then_a_crash_never_resends_what_was_forgotten(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["appendonly no, sends, crash, restart"].check()

    def test_a_restart_from_an_older_aof_never_resends_what_was_forgotten(
        self, outcomes: dict[str, Outcome]
    ) -> None:
        outcomes["restart from an older AOF"].check()
