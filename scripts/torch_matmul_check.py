"""Measure ``torch.matmul`` on a GPU, for a bit-for-bit comparison with lowprec's models.

Two steps, so that the GPU time is short and the comparison can be redone anywhere::

    python3 scripts/torch_matmul_check.py measure tests/data/torch-h200   # torch and a GPU
    python -m pytest tests/peers/test_torch_h200.py                            # lowprec, anywhere

``measure`` multiplies FP16, BF16 and TF32 matrices with small K (at most 128, so that
cuBLAS has no reason to split K) and saves the operands' bit patterns and the GPU's
results: FP32 output (``torch.mm(..., out_dtype=torch.float32)`` for FP16/BF16, plain
FP32 ``matmul`` with TF32 allowed) and the operands' own format (FP32 accumulation,
then one conversion in cuBLAS's epilogue). It also multiplies the published H100 rows
of ``tests/data/tensorcore`` (c = 0). The comparison is ``tests/peers/test_torch_h200.py``,
which runs the ``h100`` model on the same operands (scripts/README.md).
"""
import json
import pathlib
import sys
import time

import numpy as np

FORMATS = ("fp16", "bf16", "tf32")
KS = (8, 16, 32, 64, 128)
DISTS = ("normal", "wide", "small")
SIDE = 1024        # matrices multiplied on the GPU
KEEP = 64          # the leading KEEP x KEEP block of each result is saved
PAIRS = 50_000     # off-diagonal outputs of the published rows that are saved
DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tensorcore"


def _operand(rng, fmt, dist, shape):
    """float32 values exactly representable in fmt."""
    if dist == "normal":
        x = rng.standard_normal(shape)
    else:
        span = {"fp16": (-6, 6), "bf16": (-30, 30), "tf32": (-30, 30)}[fmt]
        if dist == "small":
            span = {"fp16": (-24, -10), "bf16": (-75, -55), "tf32": (-75, -55)}[fmt]
        x = rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(*span, shape)
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float32)
    x = x.astype(np.float32)
    keep = 16 if fmt == "bf16" else 13                  # low bits to clear
    return (x.view(np.uint32) & np.uint32(~((1 << keep) - 1) & 0xFFFFFFFF)).view(np.float32)


def measure(outdir):
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16}
    info = dict(torch=torch.__version__, device=dev,
                gpu=torch.cuda.get_device_name() if dev == "cuda" else "none",
                numpy=np.__version__, notes=[])
    saved = {}

    def run(fmt, a32, b32):
        """(FP32-output result, own-format result or None) as numpy arrays."""
        a = torch.from_numpy(a32).to(dev)
        b = torch.from_numpy(b32).to(dev)
        if fmt == "tf32":
            torch.backends.cuda.matmul.allow_tf32 = True
            d32 = torch.matmul(a, b)
            torch.backends.cuda.matmul.allow_tf32 = False
            return d32.cpu().numpy(), None
        a, b = a.to(tdtype[fmt]), b.to(tdtype[fmt])
        try:
            d32 = torch.mm(a, b, out_dtype=torch.float32).cpu().numpy()
        except Exception as exc:                        # older torch: no out_dtype
            info["notes"].append(f"out_dtype: {exc!r}"[:200])
            d32 = None
        dn = torch.matmul(a, b).float().cpu().numpy()
        return d32, dn

    rng = np.random.default_rng(20261129)
    for fmt in FORMATS:
        for k in KS:
            for dist in DISTS:
                a = _operand(rng, fmt, dist, (SIDE, k))
                b = _operand(rng, fmt, dist, (k, SIDE))
                d32, dn = run(fmt, a, b)
                small32, _ = run(fmt, np.ascontiguousarray(a[:KEEP]),
                                 np.ascontiguousarray(b[:, :KEEP]))
                key = f"{fmt}_K{k}_{dist}"
                saved[key + "_a"] = a[:KEEP].view(np.uint32)
                saved[key + "_b"] = b[:, :KEEP].view(np.uint32)
                if d32 is not None:
                    saved[key + "_d32"] = d32[:KEEP, :KEEP].view(np.uint32)
                    if small32 is not None and not np.array_equal(
                            small32.view(np.uint32), d32[:KEEP, :KEEP].view(np.uint32)):
                        info["notes"].append(f"{key}: {KEEP}x{KEEP} product differs "
                                             f"from the block of the {SIDE}x{SIDE} one")
                        saved[key + "_alone"] = small32.view(np.uint32)
                if dn is not None:
                    saved[key + "_dn"] = dn[:KEEP, :KEEP].view(np.uint32)

    # the published H100 rows, multiplied as whole matrices (c = 0)
    for fmt in FORMATS:
        with np.load(DATA / f"h100_{fmt}.npz") as data:
            a = data["a"].view(np.float32)
            b = np.ascontiguousarray(data["b"].view(np.float32).T)
        d32, dn = run(fmt, a, b)
        n = a.shape[0]
        i = rng.integers(0, n, PAIRS)
        j = rng.integers(0, n, PAIRS)
        key = f"published_{fmt}"
        saved[key + "_i"] = np.concatenate([np.arange(n), i])
        saved[key + "_j"] = np.concatenate([np.arange(n), j])
        for name, d in (("d32", d32), ("dn", dn)):
            if d is not None:
                saved[f"{key}_{name}"] = d[saved[key + "_i"], saved[key + "_j"]].view(np.uint32)
    if dev == "cuda":                 # which kernels cuBLAS chose, for the record
        try:
            from torch.profiler import ProfilerActivity, profile
            x = torch.ones(SIDE, 16, device=dev)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for fmt in ("fp16", "bf16"):
                    y = x.to(tdtype[fmt])
                    torch.mm(y, y.T, out_dtype=torch.float32)
                    torch.matmul(y, y.T)
                torch.backends.cuda.matmul.allow_tf32 = True
                torch.matmul(x, x.T)
                torch.matmul(x[:KEEP], x[:KEEP].T)
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.cuda.synchronize()
            info["kernels"] = sorted({e.name for e in prof.events()
                                      if "gemm" in e.name.lower() or "sm90" in e.name
                                      or "cutlass" in e.name.lower() or "sm80" in e.name
                                      or "kernel" in e.name.lower()})[:30]
        except Exception as exc:
            info["notes"].append(f"profiler: {exc!r}"[:200])
    np.savez_compressed(pathlib.Path(outdir) / "torch_matmul.npz", **saved)
    (pathlib.Path(outdir) / "torch_matmul.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] != ["measure"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    t0 = time.time()
    measure(sys.argv[2])
    print(f"measure: {time.time() - t0:.1f} s")
