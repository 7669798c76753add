"""Growth of a parser's CPU time from a quarter of its size limit to the limit.

Linear work grows about 4x over that step, quadratic work about 16x. Time is this thread's
CPU time (time.thread_time), best of several batches, so other processes on a busy machine
barely move the ratio; a call too quick to time alone is repeated in a batch.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

LINEAR_BOUND = 8.0  # a linear parser stays well under it; a quadratic one is near 16
_BATCH_S = 0.02
_ROUNDS = 3
_SLOW_S = 0.3


def _best(work: Callable[[], object], batch: int) -> float:
    best = float("inf")
    for round_ in range(_ROUNDS):
        started = time.thread_time()
        for _ in range(batch):
            work()
        best = min(best, (time.thread_time() - started) / batch)
        if round_ and best * batch > _SLOW_S:  # slow work varies little: two rounds do
            break
    return best


def growth(parse: Callable[[T], object], build: Callable[[int], T], limit: int) -> float:
    """Return CPU time of parse(build(limit)) over parse(build(limit // 4))."""
    small, large = build(limit // 4), build(limit)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()  # a collection landing in one measurement would skew the ratio
    try:
        batch = 1
        while True:
            quarter = _best(lambda: parse(small), batch)
            if quarter * batch >= _BATCH_S or batch >= 4096:
                break
            batch *= 2
        whole = _best(lambda: parse(large), max(1, batch // 4))
    finally:
        if enabled:
            gc.enable()
    return whole / quarter
