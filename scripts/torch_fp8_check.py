"""Measure FP8 ``torch._scaled_mm`` on a GPU, for a bit-for-bit comparison with lowprec.

Two steps, so that the GPU time is short and the comparison can be redone anywhere::

    python3 scripts/torch_fp8_check.py measure tests/data/torch-h200   # torch and a GPU
    python -m pytest tests/peers/test_torch_h200.py                         # lowprec, anywhere

``measure`` multiplies E4M3 and E5M2 matrices with small K (at most 128, so that cuBLAS
has no reason to split K) through ``torch._scaled_mm`` with unit scales, for FP32, FP16
and BF16 output and with ``use_fast_accum`` off and on, and saves the operands' bit
patterns (read back from the FP8 tensors, so they are exactly the values multiplied)
and the GPU's results. cuBLAS has no E5M2 x E5M2 kernel (torch refuses it; the refusal
is recorded), so E5M2 is also measured mixed: A in E5M2 times B in E4M3
(``e5m2xe4m3``). It also multiplies the published H100 FP8 rows of
``tests/data/tensorcore`` as matrices (``a @ b.T``; c = 0) and keeps the diagonal and
random off-diagonal outputs; the E5M2 rows go through the mixed path where B's row is
exactly representable in E4M3. Every call is guarded: a failure is recorded in the
JSON's ``notes`` and the rest goes on.

The comparison is ``tests/peers/test_torch_h200.py``: the ``h100`` model on the same
operands, mixed operands through a copy of it that takes FP16 inputs (FP16 holds every
E4M3 and E5M2 value; the FP8 block FMA does not depend on which FP8 format an operand
came from), FP16/BF16 output as the FP32 result rounded once (scripts/README.md).
"""
import json
import pathlib
import sys
import time

import numpy as np

FORMATS = ("e4m3", "e5m2", "e5m2xe4m3")   # "AxB": A in format A, B in format B
KS = (16, 32, 64, 128)
DISTS = ("normal", "wide")
OUTS = ("32", "16", "bf16")               # out_dtype float32, float16, bfloat16
PUB_OUTS = ("32", "16")
FAST = (0, 1)                             # use_fast_accum
SPAN = {"e4m3": 4, "e5m2": 8}             # "wide": random sign * 2**U(-SPAN, SPAN)
SIDE = 1024        # matrices multiplied on the GPU (all dimensions multiples of 16)
KEEP = 64          # the leading KEEP x KEEP block of each result is saved
PAIRS = 20_000     # off-diagonal outputs of the published rows that are saved
DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tensorcore"


def _formats(fmt):
    """(A's format, B's format)."""
    return tuple(fmt.split("x")) if "x" in fmt else (fmt, fmt)


def _operand(rng, fmt, dist, shape):
    """float32 values, to be rounded to fmt by torch's own conversion."""
    if dist == "normal":
        x = rng.standard_normal(shape)
    else:
        x = rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-SPAN[fmt], SPAN[fmt], shape)
    return x.astype(np.float32)


def measure(outdir):
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    info = dict(torch=torch.__version__, device=dev,
                gpu=torch.cuda.get_device_name() if dev == "cuda" else "none",
                numpy=np.__version__, notes=[])
    for name, get in (("cuda", lambda: torch.version.cuda),
                      ("capability", lambda: list(torch.cuda.get_device_capability())),
                      ("blas", lambda: str(torch.backends.cuda.preferred_blas_library()))):
        try:
            info[name] = get()
        except Exception as exc:
            info["notes"].append(f"{name}: {exc!r}"[:200])
    f8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    odt = {"32": torch.float32, "16": torch.float16, "bf16": torch.bfloat16}
    one = torch.tensor(1.0, device=dev)
    failures = {}                     # repr of an exception -> tags of the calls it stopped
    saved = {}

    def to8(x32, fmt):
        """(FP8 tensor on dev, the float32 values it holds) of a row-major float32 array."""
        t = torch.from_numpy(np.ascontiguousarray(x32)).to(dev).to(f8[fmt])
        return t, np.ascontiguousarray(t.float().cpu().numpy())

    def scaled(a8, b8, od, fa, tag):
        """torch._scaled_mm(a8, b8) (b8 column-major) with unit scales, or None."""
        try:
            d = torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=odt[od],
                                 use_fast_accum=bool(fa))
            return d[0] if isinstance(d, tuple) else d        # old torch: (out, amax)
        except Exception as exc:
            failures.setdefault(repr(exc)[:300], []).append(tag)
            return None

    rng = np.random.default_rng(20261130)
    for fmt in FORMATS:
        fa_, fb_ = _formats(fmt)
        for k in KS:
            for dist in DISTS:
                key = f"{fmt}_K{k}_{dist}"
                try:
                    a8, a = to8(_operand(rng, fa_, dist, (SIDE, k)), fa_)
                    bt8, bt = to8(_operand(rng, fb_, dist, (SIDE, k)), fb_)  # B's transpose
                except Exception as exc:
                    failures.setdefault(repr(exc)[:300], []).append(key + " (operands)")
                    continue
                b8 = bt8.t()                                  # (k, SIDE), column-major
                saved[key + "_a"] = a[:KEEP].view(np.uint32)
                saved[key + "_b"] = np.ascontiguousarray(bt[:KEEP].T).view(np.uint32)
                for od in OUTS:
                    for fa in FAST:
                        d = scaled(a8, b8, od, fa, f"{key}_d{od}_fa{fa}")
                        if d is not None:
                            d = np.ascontiguousarray(d[:KEEP, :KEEP].float().cpu().numpy())
                            saved[f"{key}_d{od}_fa{fa}"] = d.view(np.uint32)

    # the published H100 rows, multiplied as whole matrices (c = 0)
    for fmt in ("e4m3", "e5m2", "e5m2xe4m3"):
        fa_, fb_ = _formats(fmt)
        with np.load(DATA / f"h100_{'e5m2' if 'e5m2' in fmt else 'e4m3'}.npz") as data:
            a = data["a"].view(np.float32)
            b = data["b"].view(np.float32)
        n = a.shape[0]
        pad = -n % 16                                         # cuBLAS FP8: N % 16 == 0
        a = np.concatenate([a, np.zeros((pad, a.shape[1]), np.float32)])
        b = np.concatenate([b, np.zeros((pad, b.shape[1]), np.float32)])
        key = f"published_{fmt}"
        try:
            a8, a_back = to8(a, fa_)
            bt8, b_back = to8(b, fb_)
        except Exception as exc:
            failures.setdefault(repr(exc)[:300], []).append(key + " (operands)")
            continue
        # rows that the FP8 formats hold exactly (all of them unless B goes through E4M3)
        ok_i = np.flatnonzero((a_back == a).all(axis=1)[:n])
        ok_j = np.flatnonzero((b_back == b).all(axis=1)[:n])
        diag = np.intersect1d(ok_i, ok_j)
        if len(diag) < n:
            info["notes"].append(f"{key}: {n - len(ok_i)} rows of a, {n - len(ok_j)} of b "
                                 f"not exact in {fa_}/{fb_}; not kept")
        if len(ok_i) == 0 or len(ok_j) == 0:
            continue
        i = np.concatenate([diag, rng.choice(ok_i, PAIRS)])
        j = np.concatenate([diag, rng.choice(ok_j, PAIRS)])
        it = torch.from_numpy(i).to(dev)
        jt = torch.from_numpy(j).to(dev)
        kept = False
        for od in PUB_OUTS:
            for fa in FAST:
                d = scaled(a8, bt8.t(), od, fa, f"{key}_d{od}_fa{fa}")
                if d is not None:
                    saved[f"{key}_d{od}_fa{fa}"] = np.ascontiguousarray(
                        d[it, jt].float().cpu().numpy()).view(np.uint32)
                    kept = True
                del d
        if kept:
            saved[key + "_i"], saved[key + "_j"] = i, j

    if dev == "cuda":                 # which kernels cuBLAS chose, for the record
        info["kernels"] = {}
        try:
            from torch.profiler import ProfilerActivity, profile
            rng2 = np.random.default_rng(1)
            a8, _ = to8(_operand(rng2, "e4m3", "normal", (SIDE, 32)), "e4m3")
            bt8, _ = to8(_operand(rng2, "e4m3", "normal", (SIDE, 32)), "e4m3")
            for od in OUTS:
                for fa in FAST:
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        scaled(a8, bt8.t(), od, fa, f"profile_d{od}_fa{fa}")
                        torch.cuda.synchronize()
                    info["kernels"][f"e4m3_K32_d{od}_fa{fa}"] = sorted(
                        {e.name for e in prof.events()})[:20]
        except Exception as exc:
            info["notes"].append(f"profiler: {exc!r}"[:200])
    info["notes"] += [f"{len(tags)} call(s) failed, e.g. {tags[0]}: {msg}"
                      for msg, tags in failures.items()]
    info["saved"] = sorted(saved)
    np.savez_compressed(pathlib.Path(outdir) / "torch_fp8.npz", **saved)
    (pathlib.Path(outdir) / "torch_fp8.json").write_text(json.dumps(info, indent=1))
    print(json.dumps({k: v for k, v in info.items() if k != "saved"}, indent=1))
    print(f"saved {len(saved)} arrays")


if __name__ == "__main__":
    if sys.argv[1:2] != ["measure"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    t0 = time.time()
    measure(sys.argv[2])
    print(f"measure: {time.time() - t0:.1f} s")
