"""Matrix-product models against the floor of per-term emulation in NumPy.

The floor is what any per-term emulation must do at least: form the K products of
every output in float64 and sum them, ``(A[:, :, None] * B[None, :, :]).sum(1)``,
in chunks of rows (the same 2 MiB working set the models use). Each model's time is
printed as a ratio to it (limits: ``fp32`` 2x, the others 4x), and to ``np.matmul``
in float32, the speed a user gives up for bit-exactness.
"""

from __future__ import annotations

import contextlib

import numpy as np

import lowprec as lp
from timing import ratio, row

try:   # one BLAS thread: on a busy machine threaded BLAS calls wait on the scheduler
    from threadpoolctl import threadpool_limits
except ImportError:   # pragma: no cover - optional
    threadpool_limits = None

LIMITS = {"fp32": 2.0}
DEFAULT_LIMIT = 4.0
MODELS = ("exact", "fp32", "fp16", "v100", "t4", "a100", "ada", "h100", "b200")


def _floor(a, b, rows):
    out = np.empty((a.shape[0], b.shape[1]))
    for i in range(0, a.shape[0], rows):
        out[i:i + rows] = (a[i:i + rows, :, None] * b[None, :, :]).sum(1)
    return out


def main(quick=False):
    limits = threadpool_limits(1) if threadpool_limits else contextlib.nullcontext()
    with limits:
        _run(quick, "1 BLAS thread" if threadpool_limits else "default BLAS threads")


def _run(quick, threads):
    n = 128 if quick else 512
    rounds, inner = (5, 3) if quick else (3, 1)     # small sizes need more repeats
    rng = np.random.default_rng(0)
    a = lp.round(rng.standard_normal((n, n)), "fp16")
    b = lp.round(rng.standard_normal((n, n)), "fp16")
    rows = max(1, (1 << 18) // (n * n))          # 2 MiB of float64 products per chunk
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    print(f"  {n}x{n}x{n}, FP16 inputs, FP32 output, {threads}; ratio to the float64 "
          "per-term floor (and to np.matmul in float32)")
    for name in MODELS:
        run = (lambda m=name: lp.matmul(a, b, model=m, in_fmt="fp16"))  # noqa: E731
        r, t_model, t_floor = ratio(run, lambda: _floor(a, b, rows), rounds, inner)
        r32, _, _ = ratio(run, lambda: a32 @ b32, rounds, inner)
        # The limits are stated for 512x512x512; --quick is a smoke run.
        limit = None if quick else LIMITS.get(name, DEFAULT_LIMIT if name != "fp16" else None)
        print(row(f"{name} ({t_model * 1e3:.0f} ms; floor {t_floor * 1e3:.0f} ms)", r, limit)
              + f"   vs float32 np.matmul {r32:9.0f}x")
