"""Timing helpers for the benchmarks (part of the shared core).

Timings on the machines this book runs on vary by a third from run to run, so a benchmark times
every path the same way and keeps the least noisy estimate: the fastest of a few runs.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

__all__ = ["best_of"]


def best_of(f: Callable[[], T], repeat: int = 3) -> tuple[float, T]:
    """Run ``f()`` ``repeat`` times; return the fastest run's seconds and the last result."""
    if int(repeat) < 1:
        raise ValueError(f"repeat must be >= 1; got {repeat}")
    best, out = float("inf"), None
    for _ in range(int(repeat)):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out
