"""How ``torch.matmul`` with TF32 allowed treats FP32 operands that are not TF32 values.

Two steps, like ``torch_matmul_check.py``::

    python3 scripts/torch_tf32_inputs.py measure OUTDIR       # needs torch and a GPU
    python3 scripts/torch_tf32_inputs.py compare OUTDIR/torch_tf32_inputs.npz

``measure`` multiplies FP32 matrices with full 24-bit significands (standard normal)
with ``allow_tf32`` on, for K in 16 and 64, as 1024 x K x 1024 products (whose leading
64 x 64 block is kept) and as 64 x K x 64 products on their own. ``compare`` runs the
``h100`` model on the operands first rounded to TF32 by each of lowprec's deterministic
modes, and prints which rounding of the inputs reproduces the GPU.
"""
import json
import pathlib
import sys
import time

import numpy as np

KS = (16, 64)
SIDE, KEEP = 1024, 64


def measure(outdir):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    rng = np.random.default_rng(29112026)
    saved, info = {}, dict(torch=torch.__version__, gpu=torch.cuda.get_device_name())
    for k in KS:
        a = rng.standard_normal((SIDE, k)).astype(np.float32)
        b = rng.standard_normal((k, SIDE)).astype(np.float32)
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        big = torch.matmul(ta, tb)[:KEEP, :KEEP].cpu().numpy()
        alone = torch.matmul(ta[:KEEP].contiguous(), tb[:, :KEEP].contiguous()).cpu().numpy()
        saved[f"K{k}_a"] = a[:KEEP].view(np.uint32)
        saved[f"K{k}_b"] = b[:, :KEEP].view(np.uint32)
        saved[f"K{k}_big"] = big.view(np.uint32)
        saved[f"K{k}_alone"] = alone.view(np.uint32)
    np.savez_compressed(pathlib.Path(outdir) / "torch_tf32_inputs.npz", **saved)
    print(json.dumps(info))


def compare(path):
    import lowprec as lp

    data = np.load(path)
    dec = lambda bits: bits.view(np.float32).astype(np.float64)   # noqa: E731
    for k in KS:
        a, b = dec(data[f"K{k}_a"]), dec(data[f"K{k}_b"])
        for which in ("big", "alone"):
            got = data[f"K{k}_{which}"]
            row = [f"K={k} {which}:"]
            for mode in ("rne", "rna", "rz"):
                ra, rb = lp.round(a, "tf32", mode), lp.round(b, "tf32", mode)
                d = lp.matmul(ra, rb, model="h100", in_fmt="tf32")
                row.append(f"{mode}:{np.sum(d.astype(np.float32).view(np.uint32) == got)}")
            print(" ".join(row), f"of {got.size}")


if __name__ == "__main__":
    t0 = time.time()
    (measure if sys.argv[1] == "measure" else compare)(sys.argv[2])
    print(f"{sys.argv[1]}: {time.time() - t0:.1f} s")
