"""Timing helper shared by the benchmark scripts (run by path: their folder is on sys.path)."""

from __future__ import annotations

import gc
import statistics
import time


def time_interleaved(contenders: dict, repeats: int, *, warmup: bool = True) -> dict:
    """Median wall seconds of each callable over ``repeats`` interleaved runs
    (one untimed warm-up call each first, unless ``warmup=False``)."""
    if warmup:
        for fn in contenders.values():
            fn()
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}
