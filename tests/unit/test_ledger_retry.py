"""The ledger's one retry policy: what it repeats, how often, how patiently and for how long."""

from __future__ import annotations

import time

import pytest
import redis.exceptions as rex

from ledger.store.retry import RetryPolicy
from schemas.ledger import LedgerCorrupt

FAST = RetryPolicy(attempts=4, backoff_s=0.001, cap_s=0.002)


class Flaky:
    """Fails with `error` the first `failures` times, then answers "done"."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


class TestWhatIsRetried:
    @pytest.mark.parametrize(
        "error", [rex.ConnectionError("gone"), rex.TimeoutError("slow"), OSError("reset")]
    )
    async def test_a_lost_connection_or_reply_is_tried_again(self, error: Exception) -> None:
        flaky = Flaky(2, error)
        assert ("done", 3) == (await FAST.call(flaky), flaky.calls)

    @pytest.mark.parametrize(
        "error", [rex.ResponseError("ERR script"), LedgerCorrupt("bad stream"), ValueError("x")]
    )
    async def test_a_refusal_or_a_bug_is_never_tried_again(self, error: Exception) -> None:
        flaky = Flaky(1, error)
        with pytest.raises(type(error)):
            await FAST.call(flaky)
        assert 1 == flaky.calls


class TestHowOften:
    async def test_the_last_failure_is_raised_once_the_attempts_are_spent(self) -> None:
        flaky = Flaky(10, rex.ConnectionError("gone"))
        with pytest.raises(rex.ConnectionError):
            await FAST.call(flaky)
        assert 4 == flaky.calls

    async def test_once_means_a_single_try(self) -> None:
        flaky = Flaky(1, rex.ConnectionError("gone"))
        with pytest.raises(rex.ConnectionError):
            await RetryPolicy(attempts=1).call(flaky)
        assert 1 == flaky.calls

    async def test_the_first_try_runs_even_when_no_retry_is_wanted(self) -> None:
        flaky = Flaky(0, rex.ConnectionError("gone"))
        assert "done" == await FAST.call(flaky, still_wanted=lambda: False)

    async def test_no_retry_starts_once_it_is_no_longer_wanted(self) -> None:
        flaky = Flaky(10, rex.ConnectionError("gone"))
        wanted = iter([True, False])
        with pytest.raises(rex.ConnectionError):
            await RetryPolicy(attempts=None, backoff_s=0.001).call(
                flaky, still_wanted=lambda: next(wanted)
            )
        assert 2 == flaky.calls


class TestHowLong:
    async def test_without_an_attempt_limit_the_deadline_ends_the_tries(self) -> None:
        policy = RetryPolicy(attempts=None, backoff_s=0.01, cap_s=0.01, deadline_s=0.1)
        flaky = Flaky(10_000, rex.ConnectionError("gone"))
        started = time.monotonic()
        with pytest.raises(rex.ConnectionError):
            await policy.call(flaky)
        assert time.monotonic() - started < 0.5  # generous: the deadline is 0.1 s
        assert 2 <= flaky.calls <= 11

    async def test_pauses_double_up_to_the_cap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        pauses: list[float] = []

        async def sleep(seconds: float) -> None:
            pauses.append(seconds)

        monkeypatch.setattr("ledger.store.retry.asyncio.sleep", sleep)
        policy = RetryPolicy(attempts=6, backoff_s=0.1, cap_s=0.5)
        with pytest.raises(rex.TimeoutError):
            await policy.call(Flaky(10, rex.TimeoutError("slow")))
        assert [0.1, 0.2, 0.4, 0.5, 0.5] == pauses
