"""Section "speed": the interactive-speed figures of issue 14, each a ratio measured
side by side in this run (`timing.ratio`: interleaved, best of N) against the
operation a NumPy or ml_dtypes user would run instead.

- sequential reductions of 2e5 terms against ``np.cumsum`` of the same float64 array;
- small calls against ml_dtypes' bfloat16 cast and add;
- matrix products against float64 ``np.matmul`` (one BLAS thread), the instruction
  models' FP8 products and ``lp.mx.matmul`` included (issue 36);
- one SGD step of a 784-256-10 MLP at batch 64 (``lp.amp.train``) under every named
  policy, the scaled ones (``fp8-delayed``, ``mxfp8``, ``nvfp4``) included, against
  the same step in NumPy float32 (forward, hand-written backward, update).

The limits are the issue's acceptance figures; ``--quick`` runs smaller sizes and
checks no limit.
"""

from __future__ import annotations

import contextlib
import cProfile
import importlib.util
import os
import pstats

import numpy as np

import lowprec as lp
from timing import ratio, row

try:   # one BLAS thread: on a busy machine threaded BLAS calls wait on the scheduler
    from threadpoolctl import threadpool_limits
except ImportError:   # pragma: no cover - optional
    threadpool_limits = None


def _one_blas_thread():
    return threadpool_limits(1) if threadpool_limits else contextlib.nullcontext()


def reductions(quick):
    n = 20_000 if quick else 200_000
    rng = np.random.default_rng(0)
    uniform, normal = rng.random(n), rng.standard_normal(n)
    other = rng.standard_normal(n)
    # One NaN, one inf, halfway: the fast paths keep their speed past them (issue 36).
    with_nan, with_inf = normal.copy(), normal.copy()
    with_nan[n // 2], with_inf[n // 2] = np.nan, np.inf
    print(f"  sequential reductions of {n:,} terms; ratio to np.cumsum of the same array")
    cases = [
        ("sum, uniform, BF16, rne", lambda: lp.sum(uniform, "bf16", order="sequential"),
         uniform, 50),
        ("sum, uniform, FP32, rne", lambda: lp.sum(uniform, "fp32", order="sequential"),
         uniform, 50),
        ("sum, normal, FP16, rne", lambda: lp.sum(normal, "fp16", order="sequential"),
         normal, 500),
        ("sum, uniform, BF16, rz", lambda: lp.sum(uniform, "bf16", "rz", order="sequential"),
         uniform, None),
        ("sum, normal, FP16, sr", lambda: lp.sum(normal, "fp16", "sr", order="sequential",
                                                 rng=0), normal, None),
        ("kahan, uniform, BF16", lambda: lp.sum(uniform, "bf16", order="kahan"), uniform, 1000),
        ("kahan, normal, FP16", lambda: lp.sum(normal, "fp16", order="kahan"), normal, None),
        ("kahan, FP16 with one NaN", lambda: lp.sum(with_nan, "fp16", order="kahan"),
         with_nan, 1000),
        ("sequential, FP16 with one inf",
         lambda: lp.sum(with_inf, "fp16", order="sequential"), with_inf, 1000),
        ("dot, normal, BF16", lambda: lp.dot(normal, other, "bf16"), normal, 100),
        ("dot, normal, FP16", lambda: lp.dot(normal, other, "fp16"), normal, 100),
        ("dot fused, normal, BF16", lambda: lp.dot(normal, other, "bf16", fused=True),
         normal, None),
        ("cumsum, normal, FP16", lambda: lp.cumsum(normal, "fp16"), normal, None),
    ]
    for label, call, data, limit in cases:
        if label.startswith("cumsum") and not hasattr(lp, "cumsum"):
            continue
        r, t, _ = ratio(call, lambda data=data: np.cumsum(data), rounds=3, inner=1,
                        baseline_inner=10)
        print(row(f"{label} ({t * 1e3:.0f} ms, {t / n * 1e9:.0f} ns/term)", r,
                  None if quick else limit))


def small_calls(quick):
    if not importlib.util.find_spec("ml_dtypes"):
        print("  small calls: ml_dtypes not installed")
        return
    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(1000), rng.standard_normal(1000)
    xb, yb = x.astype(bf16), y.astype(bf16)
    t10 = lp.tensor(x[:10], "bf16")
    u10 = lp.tensor(y[:10], "bf16")
    b10, c10 = xb[:10], yb[:10]
    print("  small calls; ratio to ml_dtypes' bfloat16 of the same size")
    rounds, inner = 7, 200
    cases = [
        ("lp.round of 1,000 to BF16 / astype(bfloat16)", lambda: lp.round(x, "bf16"),
         lambda: x.astype(bf16), 3),
        ("lp.add of 1,000 in BF16 / bfloat16 add", lambda: lp.add(x, y, "bf16"),
         lambda: xb + yb, 10),
        ("Tensor t + u of 10 (BF16) / bfloat16 add", lambda: t10 + u10, lambda: b10 + c10, 20),
        ("Tensor t.sum() of 10 (BF16) / bfloat16 sum", lambda: t10.sum(), lambda: b10.sum(),
         None),
        ("lp.round of 10 to BF16 / astype(bfloat16)", lambda: lp.round(x[:10], "bf16"),
         lambda: x[:10].astype(bf16), None),
    ]
    for label, call, base, limit in cases:
        r, t, _ = ratio(call, base, rounds=rounds, inner=inner)
        print(row(f"{label} ({t * 1e6:.1f} us)", r, None if quick else limit, width=52))


def matmuls(quick):
    rng = np.random.default_rng(2)
    cases = [("h100", "fp16", 512, 50), ("fp32", "bf16", 512, 25), ("fp16", "fp16", 512, 80),
             ("fp32", "fp32", 256, 40)]
    print("  matrix products, one BLAS thread; ratio to float64 np.matmul of the same arrays")
    with _one_blas_thread():
        for model, fmt, n, limit in cases:
            n = min(n, 128) if quick else n
            a = lp.round(rng.standard_normal((n, n)), fmt)
            b = lp.round(rng.standard_normal((n, n)), fmt)
            r, t, _ = ratio(lambda: lp.matmul(a, b, model=model, in_fmt=fmt),
                            lambda: a @ b, rounds=3, inner=1, baseline_inner=10)
            print(row(f"{model} model, {fmt.upper()} inputs, {n}^3 ({t * 1e3:.0f} ms, "
                      f"{t / n**3 * 1e9:.2f} ns/MAC)", r, None if quick else limit, width=52))


def instruction_matmuls(quick):
    """The instruction models and lp.mx.matmul at 256^3 (issue 36), their operands in
    the format already (ml_dtypes FP8 arrays, block-scaled arrays): the kernels' time."""
    import ml_dtypes
    n = 64 if quick else 256
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((n, n)), rng.standard_normal((n, n))

    def fp8(v, fmt, dtype):
        return np.asarray(lp.round(v, fmt)).astype(dtype)

    e4, fnuz = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz
    a8, b8 = fp8(x, "e4m3", e4), fp8(y, "e4m3", e4)
    au, bu = fp8(x, "e4m3fnuz", fnuz), fp8(y, "e4m3fnuz", fnuz)
    mxa, mxb = lp.mx.quantize(x, "mxfp8_e4m3", axis=1), lp.mx.quantize(y, "mxfp8_e4m3", axis=0)
    nva, nvb = lp.mx.quantize(x, "nvfp4", axis=1), lp.mx.quantize(y, "nvfp4", axis=0)
    cases = [
        ("lp.matmul E4M3, b200/tcgen05", lambda: lp.matmul(a8, b8, model="b200/tcgen05"), 50),
        ("lp.matmul E4M3, h100/wgmma", lambda: lp.matmul(a8, b8, model="h100/wgmma"), 200),
        ("lp.matmul E4M3FNUZ, mi300/mfma", lambda: lp.matmul(au, bu, model="mi300/mfma"), 200),
        ("lp.mx.matmul MXFP8 (E4M3)", lambda: lp.mx.matmul(mxa, mxb), 50),
        ("lp.mx.matmul NVFP4", lambda: lp.mx.matmul(nva, nvb), 50),
    ]
    print("  instruction models and block-scaled products (FP8 operands as ml_dtypes arrays), "
          "one BLAS thread; ratio to float64 np.matmul of the same shapes")
    with _one_blas_thread():
        for label, call, limit in cases:
            r, t, _ = ratio(call, lambda: x @ y, rounds=3, inner=1, baseline_inner=10)
            print(row(f"{label}, {n}^3 ({t * 1e3:.0f} ms)", r, None if quick else limit,
                      width=52))


def numpy_step(params, x, onehot, lr):
    """One SGD step of the same MLP (Linear, ReLU, Linear, softmax cross-entropy) in
    NumPy float32: forward, hand-written backward, update."""
    w1, b1, w2, b2 = params
    h = x @ w1 + b1
    a = np.maximum(h, 0)
    z = a @ w2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = (e / e.sum(axis=1, keepdims=True) - onehot) / np.float32(len(x))
    dh = (dz @ w2.T) * (h > 0)
    lr = np.float32(lr)
    return [w1 - lr * (x.T @ dh), b1 - lr * dh.sum(axis=0), w2 - lr * (a.T @ dz),
            b2 - lr * dz.sum(axis=0)]


_DRIVER = os.path.join("tensorcore", "driver.py")


def _matmul_share(call, module=_DRIVER):
    """The fraction of ``call``'s time spent in the matrix products (one profiled run):
    the ``matmul`` of ``module`` (lp.matmul's driver, or ``"mx.py"``)."""
    profile = cProfile.Profile()
    profile.runcall(call)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(v[3] for v in stats.values())
    spent = sum(v[3] for (path, _, fn), v in stats.items()
                if fn == "matmul" and path.endswith(module))
    return spent / total


def training(quick):
    sizes, batch = ([784, 64, 10], 16) if quick else ([784, 256, 10], 64)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, sizes[0]))
    labels = rng.integers(0, sizes[-1], batch)
    x32, onehot = x.astype(np.float32), np.eye(sizes[-1], dtype=np.float32)[labels]
    params = [np.asarray(p.value, np.float32) for p in lp.nn.mlp(sizes, rng=0).parameters()]
    limits = {"fp16-mixed": 20, "fp32": 20, "bf16-mixed": 30, "fp8-delayed": 30,
              "mxfp8": 50, "nvfp4": 50}
    print(f"  one SGD step of a {'-'.join(map(str, sizes))} MLP at batch {batch} "
          "(lp.amp.train), one BLAS thread; ratio to the same step in NumPy float32")
    print("  (the model is built outside the timing; train's final FP32 evaluation is left "
          "out: lowprec.amp.training.evaluate is stubbed while timing; no progress bar)")
    training_module = importlib.import_module("lowprec.amp.training")
    evaluate = training_module.evaluate
    training_module.evaluate = lambda *args, **kwargs: (float("nan"), float("nan"))
    try:
        with _one_blas_thread():
            for name in lp.amp.POLICIES:
                # Built once: an SGD step does not build its model (the NumPy steps
                # start from ready arrays too); each call trains it two steps further.
                model = lp.nn.mlp(sizes, rng=0)

                def emulated(name=name, model=model):
                    lp.amp.train(model, (x, labels), name, 2, lr=0.02, progress=False)

                def numpy_steps():
                    p = numpy_step(params, x32, onehot, 0.02)
                    numpy_step(p, x32, onehot, 0.02)

                r, t, base = ratio(emulated, numpy_steps, rounds=5, inner=1, baseline_inner=10)
                print(row(f"{name} ({t / 2 * 1e3:.1f} ms per step, NumPy {base / 2 * 1e3:.2f} ms)",
                          r, None if quick else limits.get(name), width=52)
                      + f"   {_matmul_share(emulated):.0%} in lp.matmul, "
                      f"{_matmul_share(emulated, 'mx.py'):.0%} in lp.mx.matmul")
    finally:
        training_module.evaluate = evaluate



def main(quick=False):
    reductions(quick)
    small_calls(quick)
    matmuls(quick)
    instruction_matmuls(quick)
    training(quick)


if __name__ == "__main__":
    main()
