"""Side-by-side timing for benchmarks/run.py: ratios measured in one run.

Timings on a shared machine drift, and NumPy's own cast swings between two speeds
here (fresh output pages are sometimes much dearer to fault in). A ratio is
therefore taken from interleaved runs (candidate, baseline, candidate, ...) as the
best candidate time over the best baseline time, as ``timeit`` advises: the best
time is the one least disturbed by the machine.
"""

from __future__ import annotations

import time


def best_time(fn, inner=3):
    best = float("inf")
    for _ in range(inner):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def ratio(candidate, baseline, rounds=5, inner=3, baseline_inner=None):
    """Best time(candidate) / best time(baseline) over interleaved rounds; also the
    two best times. ``baseline_inner`` (default ``inner``): more tries per round for
    a baseline much cheaper than the candidate, whose best time is the noisier."""
    candidate()
    baseline()  # warm up both (allocations, caches, lazy imports)
    tc, tb = [], []
    for _ in range(rounds):
        tc.append(best_time(candidate, inner))
        tb.append(best_time(baseline, inner if baseline_inner is None else baseline_inner))
    return min(tc) / min(tb), min(tc), min(tb)


def row(label, value, limit=None, width=44):
    """One printed line: label, ratio, and the acceptance limit when there is one."""
    verdict = ""
    if limit is not None:
        verdict = f"  (limit {limit:g}x: {'ok' if value <= limit else 'OVER'})"
    return f"  {label:<{width}} {value:7.2f}x{verdict}"
