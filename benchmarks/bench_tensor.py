"""Tensor overhead (issue: the emulated Tensor): ``a + b`` on Tensors of 10**6
elements against ``lp.add`` on their values; the limit is 1.1x."""

from __future__ import annotations

import numpy as np

import lowprec as lp
from timing import ratio, row


def main(quick=False):
    n = 10**5 if quick else 10**6
    rng = np.random.default_rng(0)
    for fmt in ("bf16", "fp16"):
        a, b = lp.tensor(rng.standard_normal(n), fmt), lp.tensor(rng.standard_normal(n), fmt)
        va, vb = a.values, b.values
        r, t, _ = ratio(lambda: a + b, lambda: lp.add(va, vb, fmt), rounds=7)
        print(row(f"a + b ({fmt}, {n:.0e}) / lp.add ({t * 1e3:.1f} ms)", r, 1.1))
        r, _, _ = ratio(lambda: a * b, lambda: lp.mul(va, vb, fmt), rounds=7)
        print(row(f"a * b ({fmt}) / lp.mul", r, 1.1))
