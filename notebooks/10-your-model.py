# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10. Your own PyTorch model on an emulated GPU
#
# `lowprec.torch.emulate(gpu="h100")` runs every matrix product torch computes on CPU
# tensors through lowprec's model of that GPU's Tensor Cores, forward and backward
# (docs/your-model.md). The model stays an ordinary `torch.nn.Module`, trained by an
# ordinary loop with `torch.autocast` and `torch.optim`.
#
# Here: a small convolutional network trained on scikit-learn's handwritten digits in
# BF16 on a V100, an A100, an H100 and a B200; `lowprec.torch.compare`, which says per module how far
# each GPU is from a float64 reference and where the GPUs first disagree; and FP8
# `torch._scaled_mm` with fast accumulation on and off.

# %%
import contextlib

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display
from sklearn.datasets import load_digits

import lowprec as lp
import lowprec.plot
import lowprec.torch as lpt

torch.set_num_threads(1)
digits = load_digits()
x_all = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)   # N, C, H, W
y_all = torch.tensor(digits.target)
x_train, y_train = x_all[:1500], y_all[:1500]
x_test, y_test = x_all[1500:], y_all[1500:]
print(f"{len(x_train)} training and {len(x_test)} test images of 8 x 8 pixels")

# %% [markdown]
# ## Training in BF16 on four GPUs
#
# The same network, the same initial weights and the same batches on each GPU. The
# only difference is the matrix products: inside `emulate(gpu=...)`, autocast's BF16
# products take the model `lowprec.torch.model_for` names for that GPU. The V100 has
# no BF16 Tensor Cores, so its BF16 products are FP32 FMAs.
#
# The network has two convolutions and a linear layer. `emulate` runs each convolution
# as an implicit GEMM (im2col), forward and backward, with K running over input
# channel, then kernel row, then kernel column. Few steps on small batches keep this
# notebook under a minute: the emulated products are far slower than torch's own.

# %%
GPUS = ("v100", "a100", "h100", "b200")


def network():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),              # 8 x 8 x 8
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),   # 16 x 4 x 4
        torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 10))


def train(gpu=None, steps=40, batch=32):
    """SGD under bf16 autocast, on the emulated ``gpu`` (plain torch when None)."""
    net = network()
    opt = torch.optim.SGD(net.parameters(), lr=0.2, momentum=0.9)
    order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(1))
    losses = []
    with lpt.emulate(gpu=gpu) if gpu else contextlib.nullcontext():
        for step in range(steps):
            idx = order[(step * batch) % len(order):][:batch]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(net(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return net, losses


runs = {gpu: train(gpu) for gpu in GPUS}
runs["torch CPU"] = train(None)
for name, (net, losses) in runs.items():
    accuracy = (net(x_test).argmax(1) == y_test).float().mean().item()
    print(f"{name:>9}: final loss {losses[-1]:.4f}, test accuracy {accuracy:.3f}")

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
for name, (_, losses) in runs.items():
    ax.plot(losses, label=name, linewidth=1)
ax.set_xlabel("step")
ax.set_ylabel("loss")
ax.set_title("The same BF16 training on four emulated GPUs, and in torch on the CPU")
ax.legend()

# %% [markdown]
# The curves lie on top of each other: for this model and this many steps, which GPU
# trains it does not matter. How far apart are the GPUs, step by step, bit for bit?

# %%
for name in list(runs)[1:]:
    diff = np.abs(np.array(runs[name][1]) - np.array(runs["v100"][1]))
    print(f"{name:>9} against v100: {np.count_nonzero(diff)} of {len(diff)} losses differ, "
          f"by at most {diff.max():.2e}")

# %% [markdown]
# Under autocast every product's FP32 result is rounded to BF16, 8 significant bits.
# The GPUs' accumulations differ by a few FP32 units in the last place, far below
# BF16's rounding step. They change a BF16 result only where the sum lies next to a
# rounding boundary, which is rare: in this run no loss differs, and below, one
# batch's gradients on the H100 equal the V100's bit for bit. An accumulator that is
# itself short shows what the GPUs are spared: FP16 accumulation (`matmul="fp16"`, an
# `lp.MODELS` entry) changes many of them.

# %%
def gradients(**where):
    """The weights' gradients of one batch of 256 images under ``emulate(**where)``."""
    net = network()
    with lpt.emulate(**where):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(net(x_train[:256]), y_train[:256])
        loss.backward()
    return {name: p.grad.numpy() for name, p in net.named_parameters() if name.endswith("weight")}


grads = {f"gpu={gpu!r}": gradients(gpu=gpu) for gpu in ("v100", "h100")}
grads["matmul='fp16'"] = gradients(matmul="fp16")
reference = grads["gpu='v100'"]
for label, g in list(grads.items())[1:]:
    changed = {name: int(np.count_nonzero(g[name] != reference[name])) for name in g}
    print(f"{label:>15} against v100, weights whose gradient differs: {changed}")

# %% [markdown]
# ## Where does the model lose precision? `compare`
#
# `lpt.compare(model, inputs, gpus)` runs one forward pass per GPU under bf16 autocast,
# and one with the model and inputs in float64 (the reference). A forward hook on
# every named submodule records its output. The table gives, per module, each GPU's
# normwise relative error `||y - r|| / ||r||` against the reference, the largest
# distance in ulps (of BF16, the outputs' dtype) between any two GPUs, the bits that
# distance reaches, and which GPUs agree bit for bit.

# %%
trained = runs["h100"][0].eval()
table = lpt.compare(trained, x_test[:128], GPUS)
display(table)

# %%
ax = lowprec.plot.compare(table)

# %% [markdown]
# Every GPU's error is about `2**-9`, BF16's own rounding: the operands and outputs in
# BF16 cost far more than the Tensor Cores' accumulations. The first convolution's
# products have 9 terms, and there the four GPUs agree bit for bit. The second one's
# have 72 (8 channels times a 3 x 3 kernel): the V100's FP32 FMAs and the Tensor Cores
# first part there, by one BF16 ulp, a difference the error column cannot see.
#
# In FP32 with TF32 allowed (`torch.set_float32_matmul_precision("high")`, which
# `emulate` reads at each product) the picture changes: the V100 has no TF32 and
# computes in FP32, the others round the operands to TF32, and the A100's Tensor Core
# accumulates differently from the H100's and the B200's. Near zero (a ReLU's
# inputs) few bits are significant, so the largest distance in FP32 ulps is large;
# the error column is the one that weighs it by the output's size.

# %%
torch.set_float32_matmul_precision("high")
tf32_table = lpt.compare(trained, x_test[:128], GPUS, dtype=None)
torch.set_float32_matmul_precision("highest")
ax = lowprec.plot.compare(tf32_table)
display(tf32_table)

# %% [markdown]
# ## FP8 `_scaled_mm`: fast accumulation on and off
#
# On Hopper, `torch._scaled_mm(..., use_fast_accum=True)` keeps the whole sum in the
# Tensor Core's accumulator, which truncates each block's products as it aligns them.
# With `use_fast_accum=False`, the partial sum is promoted into an FP32 register every
# 128 products. Against the exact product (`lp.matmul` with `model="exact"`, rounded
# once to FP32), the error of the fast path grows with K.

# %%
rng = np.random.default_rng(0)
one = torch.tensor(1.0)
rows = []
for k in (128, 512, 2048):
    a = torch.from_numpy(rng.standard_normal((16, k), dtype=np.float32)).to(torch.float8_e4m3fn)
    b = torch.from_numpy(rng.standard_normal((k, 16), dtype=np.float32)).to(torch.float8_e4m3fn)
    exact = lp.matmul(a.float().numpy(), b.float().numpy(), model="exact", in_fmt="e4m3",
                      out_fmt="fp32")
    row = {"K": k}
    for fast in (True, False):
        with lpt.emulate(gpu="h100"):
            d = torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one,
                                 out_dtype=torch.float32, use_fast_accum=fast)
        err = np.abs(d.numpy() - exact) / np.linalg.norm(exact, ord=np.inf)
        row["fast on" if fast else "fast off"] = err.max()
    rows.append(row)
for row in rows:
    print(f"K = {row['K']:>5}: max error / max |exact|: fast accumulation on "
          f"{row['fast on']:.2e}, off {row['fast off']:.2e}")

# %% [markdown]
# Up to K = 128 the two paths are the same kernel. Beyond it, the fast path's error
# keeps growing with K, while the promoted path's stays at the level of one slice of
# 128 products. This is
# DeepSeek-V3's reason for promoting every 128 products; the emulation lets you see
# it on a CPU, for your own shapes.
