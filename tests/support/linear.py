"""Growth of a parser's CPU time from a quarter of its size limit to the limit.

Linear work grows about 4x over that step, quadratic work about 16x. Time is this thread's
CPU time (time.thread_time): the best of several rounds that alternate the two sizes, so a
slow spell of a busy machine hits both alike; a call too quick to time alone is repeated in
a batch, and garbage collection is off while measuring. A ratio over the bound is measured
again, up to three times, and the smallest counts: beside two busy loops and the rest of the
suite a linear header parser once measured 10.7x (4.1x idle), while quadratic work measures near
16x on every attempt.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

LINEAR_BOUND = 10.0  # linear work measures 4-7x here; quadratic work is near 16x
_BATCH_S = 0.02
_ROUNDS = 5
_SLOW_S = 0.3  # work this slow varies little: three rounds do
_ATTEMPTS = 3


def _per_call(work: Callable[[], object], batch: int) -> float:
    started = time.thread_time()
    for _ in range(batch):
        work()
    return (time.thread_time() - started) / batch


def growth(parse: Callable[[T], object], build: Callable[[int], T], limit: int) -> float:
    """Return CPU time of parse(build(limit)) over parse(build(limit // 4)), measured again
    (up to three times in all) while it exceeds LINEAR_BOUND."""
    small, large = build(limit // 4), build(limit)
    best = float("inf")
    for _ in range(_ATTEMPTS):
        best = min(best, _growth_once(parse, small, large))
        if best < LINEAR_BOUND:
            break
    return best


def _growth_once(parse: Callable[[T], object], small: T, large: T) -> float:
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        batch = 1
        quarter = _per_call(lambda: parse(small), batch)
        while quarter * batch < _BATCH_S and batch < 4096:
            batch *= 2
            quarter = _per_call(lambda: parse(small), batch)
        whole = float("inf")
        for round_ in range(_ROUNDS):
            whole = min(whole, _per_call(lambda: parse(large), max(1, batch // 4)))
            quarter = min(quarter, _per_call(lambda: parse(small), batch))
            if round_ >= 2 and whole > _SLOW_S:
                break
    finally:
        if enabled:
            gc.enable()
    return whole / quarter
