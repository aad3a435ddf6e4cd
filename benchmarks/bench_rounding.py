"""lp.round against NumPy's own cast, ml_dtypes, gfloat and pychop (issue: core numerics).

Inputs: 10**7 float64 values (standard normal, so every format's normal range is
exercised and FP8 sees some overflow). lp.round uses ``lp.threads()`` threads on
inputs this large; the single-thread ratios are printed too. Limits from the acceptance
criteria: RNE to BF16/FP16/E4M3 at most 1.25x NumPy's ``x.astype(np.float16)``, the other
deterministic modes 1.5x, ``sr`` 3x; extra memory at most twice the input.
"""

from __future__ import annotations

import importlib.util
import tracemalloc

import numpy as np

import lowprec as lp
from timing import ratio, row

FORMATS = ("bf16", "fp16", "e4m3")
LIMITS = {"rne": 1.25, "rna": 1.5, "rz": 1.5, "ru": 1.5, "rd": 1.5, "ro": 1.5, "sr": 3.0}


def peak_extra_memory(fn, nbytes):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / nbytes


def main(quick=False):
    n = 10**6 if quick else 10**7
    x = np.random.default_rng(0).standard_normal(n)
    numpy_cast = lambda: x.astype(np.float16)  # noqa: E731
    threads = lp.threads()
    print(f"lp.round on {n:.0e} float64 values, time / time of x.astype(np.float16),"
          f" lp.threads() = {threads} (NumPy's cast uses one):")
    for mode, limit in LIMITS.items():
        for name in FORMATS:
            r, t, _ = ratio(lambda: lp.round(x, name, mode, rng=0), numpy_cast, rounds=9)
            print(row(f"{mode:>3} -> {name:<5} ({t * 1e3:6.1f} ms)", r, limit))
    if threads > 1:
        print("the same on one thread, lp.threads(1) (for comparison; no limit):")
        lp.threads(1)
        try:
            for mode in LIMITS:
                for name in FORMATS:
                    r, t, _ = ratio(lambda: lp.round(x, name, mode, rng=0), numpy_cast,
                                    rounds=5)
                    print(row(f"{mode:>3} -> {name:<5} ({t * 1e3:6.1f} ms)", r))
        finally:
            lp.threads(threads)
    # IEEE P3109's projection (code points) against lp.round into E4M3 (values).
    r, t, _ = ratio(lambda: lp.p3109.project(x, "binary8p3se"), lambda: lp.round(x, "e4m3"),
                    rounds=7)
    print(row(f"p3109.project -> binary8p3se ({t * 1e3:6.1f} ms) / e4m3", r, 2.0))
    mem = max(peak_extra_memory(lambda: lp.round(x, f, m, rng=0), x.nbytes)
              for f in FORMATS for m in ("rne", "sr"))
    print(row("peak extra memory / input size", mem, 2.0))

    print("\nlp.round (rne) / peer's cast of the same values:")
    if importlib.util.find_spec("ml_dtypes"):
        import ml_dtypes
        for name, dt in (("bf16", ml_dtypes.bfloat16), ("e4m3", ml_dtypes.float8_e4m3fn)):
            r, _, _ = ratio(lambda: lp.round(x, name), lambda: x.astype(dt))
            print(row(f"vs ml_dtypes astype({dt.__name__})", r))
    else:
        print("  ml_dtypes not installed")
    small = x[: 10**6]
    if importlib.util.find_spec("gfloat"):
        import gfloat
        from gfloat.formats import format_info_binary16, format_info_ocp_e4m3
        for name, fi in (("fp16", format_info_binary16), ("e4m3", format_info_ocp_e4m3)):
            r, _, _ = ratio(lambda: lp.round(small, name), lambda: gfloat.round_ndarray(fi, small),
                            rounds=3, inner=1)
            print(row(f"vs gfloat.round_ndarray({name}), 1e6 values", r))
    else:
        print("  gfloat not installed")
    if importlib.util.find_spec("pychop"):
        import pychop
        chop = pychop.Chop(exp_bits=5, sig_bits=10, rmode=1)
        r, _, _ = ratio(lambda: lp.round(small, "fp16"), lambda: chop(small), rounds=2, inner=1)
        print(row("vs pychop.Chop(fp16), 1e6 values", r))
    else:
        print("  pychop not installed")
