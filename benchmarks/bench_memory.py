"""Peak extra memory of lp.round, lp.encode, lp.add (FP64 target) and the exact matmul
model, for every input dtype; then of the work sets that were once unbounded
(`BOUNDED`: ``mx.matmul``, ``linalg.lstsq`` with many columns, the direct FFT sum).

Two measures per case, each in a fresh subprocess: the increase of peak RSS during
the call (``VmHWM`` after the call, reset through ``/proc/self/clear_refs`` just
before it, minus ``VmRSS`` before it, freed memory first handed back by
``malloc_trim``), then tracemalloc's peak during a second run of the same call
(NumPy reports its buffers to tracemalloc). "extra" is either peak minus the
result's own size, in MiB and in units of the input's size, printed next to the
documented bound on it:

- round, encode: ``lowprec.rounding.WORK_BYTES`` per thread, whatever the input's
  size and dtype;
- add: ``lowprec.arith.MEMORY_CHUNKS`` float64 chunks of ``CHUNK`` elements per thread;
- matmul: ``lowprec.tensorcore.MEMORY_BOUND`` plus what its docstring adds on top (the
  operands rounded into float64, boolean masks of the operands' and output's size);
- mx.matmul, lstsq, fft: the bound each docstring states (see `_bounded`);
- the instruction models (FP8 operands as ml_dtypes arrays) and ``mx.matmul`` at
  1024^3: ``MEMORY_BOUND`` plus what ``lp.matmul``'s and ``mx.matmul``'s docstrings
  add on top.

round and encode see the full range of every integer dtype (64-bit ones need the
exact ``hi + lo`` split) and long doubles between float64 neighbours; add gets
integers below 2**52 and long doubles that are float64 values (elements with a
tail take arith's exact per-element path: minutes at these sizes, a matter of
speed, not memory).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint64", "bool",
          "longdouble", "bfloat16")
OPS = ("round", "encode", "add", "matmul")
MiB = 2.0 ** 20


def _inputs(dtype, shape, seed, tails=True):
    """Values of ``dtype``; with ``tails``, ones float64 cannot hold (64-bit ints over
    their full range, long doubles between float64 neighbours)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "bool":
        return rng.random(n).reshape(shape) < 0.5
    if dtype in ("int32", "int64", "uint64"):
        info = np.iinfo(dtype)
        lo, hi = (info.min, info.max) if tails else (max(info.min, -2**52), min(info.max, 2**52))
        return rng.integers(lo, hi, n, dtype=dtype, endpoint=True).reshape(shape)
    x = rng.standard_normal(n).reshape(shape) * 100.0
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    x = x.astype(dtype)
    if dtype == "longdouble" and tails:
        x *= 1 + np.longdouble(2) ** -60
    return x


#: The work sets that were unbounded before (reliability review R3-12, R3-14, R3-16):
#: label -> (op, size). Each bound is the one its docstring states.
BOUNDED = {"mx.matmul MXFP8 E4M3": ("mx_matmul", 128),
           "mx.matmul MXFP8 E4M3, 1024^3": ("mx_matmul:mxfp8_e4m3", 1024),
           "mx.matmul NVFP4, 1024^3": ("mx_matmul:nvfp4", 1024),
           "matmul E4M3 b200/tcgen05 1024^3": ("instruction:b200/tcgen05", 1024),
           "matmul E4M3 h100/wgmma 1024^3": ("instruction:h100/wgmma", 1024),
           "matmul E4M3FNUZ mi300/mfma 1024^3": ("instruction:mi300/mfma", 1024),
           "linalg.lstsq, b of n columns": ("lstsq", 300),
           "fft.fft BF16, n = 255": ("fft", 255),
           "fft.fft BF16, n = 1023": ("fft", 1023)}


def _bounded(op, n):
    """`_call` for the ops of `BOUNDED`: (fn, input bytes, result bytes, bound)."""
    import importlib

    import numpy as np

    import lowprec as lp
    rng = np.random.default_rng(0)
    if op == "mx_matmul":          # (n, 16 n) @ (16 n, n): K = 2048 at n = 128
        mm = importlib.import_module("lowprec.tensorcore.driver")
        a = lp.mx.quantize(rng.standard_normal((n, 16 * n)), "mxfp8_e4m3", axis=1)
        b = lp.mx.quantize(rng.standard_normal((16 * n, n)), "mxfp8_e4m3", axis=0)
        operands = 8 * (a.elements.size + b.elements.size + a.scales.size + b.scales.size)
        # mx.matmul's docstring: MEMORY_BOUND, the operands' decoded values, 4 bytes per
        # element (the fast paths' exponents), a few float64 arrays of the result's size
        # (six, counted generously).
        return (lambda: lp.mx.matmul(a, b), operands, 8 * n * n,
                mm.MEMORY_BOUND + operands + 4 * (a.elements.size + b.elements.size)
                + 6 * 8 * n * n)
    if op.startswith("mx_matmul:"):   # (n, n) @ (n, n) of the scheme
        mm = importlib.import_module("lowprec.tensorcore.driver")
        scheme = op.partition(":")[2]
        a = lp.mx.quantize(rng.standard_normal((n, n)), scheme, axis=1)
        b = lp.mx.quantize(rng.standard_normal((n, n)), scheme, axis=0)
        operands = 8 * (a.elements.size + b.elements.size + a.scales.size + b.scales.size)
        return (lambda: lp.mx.matmul(a, b), operands, 8 * n * n,
                mm.MEMORY_BOUND + operands + 4 * (a.elements.size + b.elements.size)
                + 6 * 8 * n * n)
    if op.startswith("instruction:"):   # (n, n) @ (n, n) FP8 arrays (ml_dtypes)
        import ml_dtypes
        mm = importlib.import_module("lowprec.tensorcore.driver")
        rounding = importlib.import_module("lowprec.rounding")
        model = op.partition(":")[2]
        fmt, dtype = (("e4m3fnuz", ml_dtypes.float8_e4m3fnuz) if model == "mi300/mfma"
                      else ("e4m3", ml_dtypes.float8_e4m3fn))
        a, b = (np.asarray(lp.round(rng.standard_normal((n, n)), fmt)).astype(dtype)
                for _ in range(2))
        # lp.matmul's docstring: MEMORY_BOUND, 8 bytes per entry of a, b and the
        # result, 2 per row of a and column of b, and lp.round's buffers.
        return (lambda: lp.matmul(a, b, model=model, progress=False), a.nbytes + b.nbytes,
                8 * n * n,
                mm.MEMORY_BOUND + 8 * 3 * n * n + 2 * 2 * n
                + rounding.WORK_BYTES * lp.threads())
    if op == "lstsq":              # (n, n / 2) with n / 2 right-hand sides, FP32
        la = importlib.import_module("lowprec.linalg")
        m, k = n, n // 2
        a = lp.tensor(rng.standard_normal((m, k)), "fp32")
        b = lp.tensor(rng.standard_normal((m, k)), "fp32")
        # lstsq's docstring: chunks of max(2**16, m n) products of about 100 bytes,
        # besides qr's O(m n) work (counted as 64 float64 arrays of a's size).
        return (lambda: la.lstsq(a, b), 2 * 8 * m * k, 8 * k * k,
                100 * max(2**16, m * k) + 64 * 8 * m * k)
    fft = importlib.import_module("lowprec.fft")
    x = lp.tensor(rng.standard_normal((32, n) if n < 1000 else n), "bf16")
    # fft's docstring: blocks of max(2**16, n) products of under 300 bytes each.
    return (lambda: fft.fft(x), 8 * x.size, 16 * x.size, 300 * max(2**16, n))


def _call(op, dtype, n):
    """(function to measure, input bytes, result bytes, documented bound on extra bytes)."""
    import importlib

    import lowprec as lp
    if op in {op for op, _ in BOUNDED.values()}:
        return _bounded(op, n)
    mm = importlib.import_module("lowprec.tensorcore.driver")   # MEMORY_BOUND's home
    rounding = importlib.import_module("lowprec.rounding")     # WORK_BYTES, as documented
    per_call = rounding.WORK_BYTES * lp.threads()
    if op == "matmul":
        side = n
        a, b = _inputs(dtype, (side, side), 1, False), _inputs(dtype, (side, side), 2, False)
        if dtype in ("int32", "int64", "uint64"):
            a, b = a % 2048, b % 2048            # integers FP16 holds: a product to round
        out_bytes = 8 * side * side
        # MEMORY_BOUND, plus the docstring's "on top": float64 operands and masks.
        bound = mm.MEMORY_BOUND + 8 * 2 * side * side + 3 * side * side
        return (lambda: lp.matmul(a, b, model="exact", in_fmt="fp16"),
                a.nbytes + b.nbytes, out_bytes, bound)
    x = _inputs(dtype, (n,), 1)
    if op == "round":
        return lambda: lp.round(x, "bf16"), x.nbytes, 8 * n, per_call
    if op == "encode":
        return lambda: lp.encode(x, "bf16"), x.nbytes, 2 * n, per_call
    x, y = _inputs(dtype, (n,), 1, False), _inputs(dtype, (n,), 2, False)
    arith = importlib.import_module("lowprec.arith")
    # arith's documented bound: MEMORY_CHUNKS float64 chunks per thread (if it states one).
    per_add = getattr(arith, "MEMORY_CHUNKS", rounding.WORK_BUFFERS) * 8 * rounding.CHUNK
    return (lambda: lp.add(x, y, "fp64"), x.nbytes + y.nbytes, 8 * n,
            per_add * lp.threads())


def _status():
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values


def _child(op, dtype, n):
    """Run in a fresh process: measure one case, print one JSON line."""
    import gc
    import tracemalloc
    fn, in_bytes, out_bytes, bound = _call(op, dtype, n)
    gc.collect()
    try:                                 # hand the inputs' freed temporaries back first
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    rss = None
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                 # resets VmHWM to the current RSS (Linux)
        before = _status()["VmRSS"]
        result = fn()
        rss = _status()["VmHWM"] - before
        del result
    except OSError:
        fn()                             # no /proc: tracemalloc only (and warm-up)
    gc.collect()
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result = getattr(result, "values", result)        # a Tensor's array
    print(json.dumps(dict(rss=rss, traced=peak, result=int(result.nbytes), input=in_bytes,
                          expected_result=out_bytes, bound=bound)))


def _measure(op, dtype, n):
    cmd = [sys.executable, str(pathlib.Path(__file__)), "--child", op, dtype, str(n)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    if done.returncode:
        return None, (done.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1]), None


def main(quick=False):
    import lowprec as lp
    n = 1 << 21 if quick else 1 << 24
    side = 512 if quick else 2048
    print(f"peak extra memory = peak - result size; {n:,} elements per array "
          f"({side}x{side} for matmul), lp.threads() = {lp.threads()}; "
          f"'x in' = in units of the input's size")
    header = (f"  {'call':<34} {'dtype':<10} {'in MiB':>7} {'out MiB':>8} "
              f"{'traced extra':>18} {'RSS extra':>18} {'bound MiB':>9}  verdict")
    labels = {"round": 'lp.round(x, "bf16")', "encode": 'lp.encode(x, "bf16")',
              "add": 'lp.add(x, y, "fp64")',
              "matmul": 'matmul(model="exact", fp16)'}
    cases = [(labels[op], op, dtype, side if op == "matmul" else n)
             for op in OPS for dtype in DTYPES]
    cases += [(label, op, "float64", size) for label, (op, size) in BOUNDED.items()]
    for i, (label, op, dtype, size) in enumerate(cases):
        if i == 0 or op != cases[i - 1][1]:
            print(header)
        got, err = _measure(op, dtype, size)
        if got is None:
            print(f"  {label:<34} {dtype:<10} failed: {err}")
            continue
        cells, verdict = [], "ok"
        for key in ("traced", "rss"):
            if got[key] is None:
                cells.append(f"{'n/a':>18}")
                continue
            extra = got[key] - got["result"]
            cells.append(f"{extra / MiB:8.1f} ({extra / got['input']:5.2f}x in)")
            if extra > got["bound"]:
                verdict = "OVER"
        print(f"  {label:<34} {dtype:<10} {got['input'] / MiB:7.1f} "
              f"{got['result'] / MiB:8.1f} {cells[0]:>18} {cells[1]:>18} "
              f"{got['bound'] / MiB:9.1f}  {verdict}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        sys.path.insert(0, str(HERE.parent))
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.path.insert(0, str(HERE))
        sys.path.insert(0, str(HERE.parent))
        main(quick="--quick" in sys.argv)
