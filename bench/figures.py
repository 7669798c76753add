"""Small helpers the benchmarks share for the figures they print."""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of durations in seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
