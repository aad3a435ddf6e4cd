"""How ``torch.matmul`` with TF32 allowed treats FP32 operands that are not TF32 values.

Two steps, like ``torch_matmul_check.py``::

    python3 scripts/torch_tf32_inputs.py measure tests/data/torch-h200   # torch and a GPU
    python -m pytest tests/peers/test_torch_h200.py                           # lowprec, anywhere

``measure`` multiplies FP32 matrices with full 24-bit significands (standard normal)
with ``allow_tf32`` on, for K in 16 and 64, as 1024 x K x 1024 products (whose leading
64 x 64 block is kept) and as 64 x K x 64 products on their own. The comparison is
``tests/peers/test_torch_h200.py``: the ``h100`` model on the operands rounded to TF32 to
nearest even reproduces the GPU, truncated (or, at K = 64, ties-away) operands do not
(scripts/README.md).
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


if __name__ == "__main__":
    if sys.argv[1:2] != ["measure"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    t0 = time.time()
    measure(sys.argv[2])
    print(f"measure: {time.time() - t0:.1f} s")
