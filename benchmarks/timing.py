"""Side-by-side timing for benchmarks/run.py: ratios measured in one run.

Timings on a shared machine drift; a ratio is therefore taken from interleaved
runs (candidate, baseline, candidate, baseline, ...) as the median of the
per-round ratios, each run being the best of ``inner`` calls.
"""

from __future__ import annotations

import statistics
import time


def best_time(fn, inner=3):
    best = float("inf")
    for _ in range(inner):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def ratio(candidate, baseline, rounds=5, inner=3):
    """Median over rounds of time(candidate) / time(baseline); also the two medians."""
    candidate()
    baseline()  # warm up both (allocations, caches, lazy imports)
    ratios, tc, tb = [], [], []
    for _ in range(rounds):
        c = best_time(candidate, inner)
        b = best_time(baseline, inner)
        ratios.append(c / b)
        tc.append(c)
        tb.append(b)
    return statistics.median(ratios), statistics.median(tc), statistics.median(tb)


def row(label, value, limit=None, width=44):
    """One printed line: label, ratio, and the acceptance limit when there is one."""
    verdict = ""
    if limit is not None:
        verdict = f"  (limit {limit:g}x: {'ok' if value <= limit else 'OVER'})"
    return f"  {label:<{width}} {value:7.2f}x{verdict}"
