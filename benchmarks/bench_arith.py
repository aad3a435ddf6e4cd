"""Section "arith": correctly rounded arithmetic against the rounding kernel alone.

Each ratio is time(lp.<op>(x, y, fmt)) / time(lp.round(x, fmt)) on the same
float64 input, measured side by side in one run (timing.ratio). Two inputs: operands
that are already BF16 values (the usual emulation), and arbitrary float64 operands
(every error term nonzero). Limits from the issue: add and mul at most 3x, div and
sqrt at most 5x.
"""

from __future__ import annotations

import numpy as np

import lowprec as lp
from timing import ratio, row

LIMITS = {"add": 3, "mul": 3, "div": 5, "sqrt": 5}


def main(quick=False):
    n = 10**6 if quick else 10**7
    rng = np.random.default_rng(0)
    raw = {"float64": (rng.standard_normal(n), rng.standard_normal(n))}
    raw["bf16 values"] = tuple(lp.round(v, "bf16") for v in raw["float64"])
    fmt, rounds = "bf16", (3 if quick else 5)
    print(f"  n = {n:,}, format BF16, mode rne; ratio to lp.round(x, 'bf16')")
    for label, (x, y) in raw.items():
        def baseline(x=x):
            lp.round(x, fmt)
        calls = {
            "add": lambda x=x, y=y: lp.add(x, y, fmt),
            "mul": lambda x=x, y=y: lp.mul(x, y, fmt),
            "div": lambda x=x, y=y: lp.div(x, y, fmt),
            "sqrt": lambda x=x: lp.sqrt(np.abs(x), fmt),
        }
        for op, call in calls.items():
            r, tc, tb = ratio(call, baseline, rounds=rounds, inner=1 if not quick else 2)
            print(row(f"{op} ({label} operands, {tc * 1e3:.0f} ms vs {tb * 1e3:.0f} ms)", r,
                      LIMITS[op]))
    # Reductions: a Python loop over the reduced axis, vectorised across the others.
    rows, cols = (100, 10**4) if quick else (1000, 10**4)
    x = lp.round(rng.standard_normal((rows, cols)), fmt)
    for order in ("sequential", "pairwise", "kahan"):
        r, tc, tb = ratio(lambda order=order: lp.sum(x, fmt, axis=0, order=order),
                          lambda: lp.round(x, fmt), rounds=3, inner=1)
        print(row(f"sum axis 0 of ({rows:,}, {cols:,}), {order} ({tc * 1e3:.0f} ms)", r))
    ones = np.ones(2000)
    r, tc, tb = ratio(lambda: lp.sum(ones, fmt, order="sequential"), lambda: lp.round(ones, fmt),
                      rounds=3, inner=1)
    print(f"  1-D sequential sum: {tc / ones.size * 1e6:.0f} us per term (per-step overhead)")

if __name__ == "__main__":
    main()
