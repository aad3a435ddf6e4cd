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
# # 5. Training with FP8 and block scales
#
# The same small network trained four ways: BF16 mixed precision, FP8 with per-tensor
# *delayed* scaling (Transformer Engine's recipe), MXFP8 (a power-of-two scale per 32
# values) and NVFP4 (4-bit values, a UE4M3 scale per 16, a tensor scale, gradients
# stochastically rounded). Every matrix product's operands are quantized as the recipe
# says; the block-scaled ones are multiplied by the bit-accurate model of Blackwell's
# block-scaled Tensor Core instruction (`b200/tcgen05`), the FP8 ones by the policy's
# matmul model (FP32 accumulation of exact products). Every number below is computed as the notebook runs:
# which blocks each scale rule clips, what is flushed to zero, and what it does to the
# loss. (See also [the block-scaled formats page](../docs/block-scaled.md) and
# [mixed-precision training](../docs/mixed-precision.md).)

# %%
import dataclasses

import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import amp, mx, nn

# %% [markdown]
# ## What a scale rule does to one block
#
# A block's scale comes from its largest magnitude, amax. The OCP MX rule takes
# `2**(floor(log2 amax) - emax)`, with `emax` the element format's largest exponent:
# the block's largest value can then land above the element format's maximum and is
# clamped. The rounded-up rules (`ceil`, and `rceil`, which cuBLAS and torchao use)
# pick the least power of two that keeps amax in range. NVFP4 rounds `amax / 6` into
# its UE4M3 scale to nearest, so about half its blocks round the scale down and clamp
# their top value a little. Here is the fraction of blocks of normally distributed
# values whose largest value was clamped, and the fraction of nonzero values flushed
# to zero, per scheme and rule.

# %%
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 256))

rows = []
for scheme in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4", "nvfp4"):
    for rule in (("floor", "rceil", "even") if scheme != "nvfp4" else ("(UE4M3 RNE)",)):
        q = mx.quantize(x, scheme, scale_rule=rule if scheme != "nvfp4" else "floor")
        clipped = np.abs(x) > q.limits
        blocks = clipped.reshape(x.shape[0], -1, q.block).any(axis=-1)
        flushed = (q.dequantize() == 0) & (x != 0)
        err = np.abs(q.dequantize() - x).mean() / np.abs(x).mean()
        rows.append((scheme, rule, blocks.mean(), clipped.mean(), flushed.mean(), err))

print(f"{'scheme':11} {'rule':12} {'blocks clipped':>14} {'values clipped':>14} "
      f"{'flushed':>8} {'rel. error':>10}")
for scheme, rule, b, c, f, e in rows:
    print(f"{scheme:11} {rule:12} {b:14.1%} {c:14.2%} {f:8.2%} {e:10.4f}")

# %% [markdown]
# Under the floor rule nearly a third of the FP4 blocks lose their largest value to
# clamping (the element's maximum, 6, is below `2**(emax+1) = 8`), and a sixth of the
# FP8 blocks (both FP8 formats top out at 1.75 times a power of two); the rounded-up
# rule clamps none but leaves the small values of each block fewer steps, so more of
# them are flushed to zero. Rounding the scale to nearest (`even`) clamps most blocks.
# NVFP4's finer scale (UE4M3, not a power of two) and smaller blocks give the smallest
# error of the 4-bit schemes.

# %% [markdown]
# ## The task and the runs
#
# Gaussian clusters in 16 dimensions, an MLP 16-32-4, full-batch SGD. The policies are
# `bf16-mixed` (BF16 compute, FP32 master weights and loss) plus a recipe for the
# operands of every matrix product: `fp8-delayed`, `mxfp8` (RCEIL scales), `nvfp4`;
# and two variations: MXFP8 with the OCP floor rule, and NVFP4 with its gradients
# rounded to nearest instead of stochastically.

# %%
data = amp.blobs(128, 16, 4, spread=1.5, seed=1)
STEPS, LR = 40, 0.2

policies = {
    "bf16-mixed": "bf16-mixed",
    "fp8-delayed": "fp8-delayed",
    "mxfp8 (rceil)": "mxfp8",
    "mxfp8 (OCP floor)": dataclasses.replace(
        amp.Policy.named("mxfp8"), operands=amp.BlockScaling("mxfp8_e4m3", scale_rule="floor")),
    "nvfp4 (SR grads)": "nvfp4",
    "nvfp4 (RNE grads)": dataclasses.replace(
        amp.Policy.named("nvfp4"), operands=amp.BlockScaling("nvfp4")),
}
runs = {name: amp.train(nn.mlp([16, 32, 4], rng=0), data, p, STEPS, lr=LR)
        for name, p in policies.items()}

print(f"{'run':18} {'final loss':>10} {'accuracy':>8}   blocks clipped (x, w, dy)"
      f"    flushed (x, w, dy)")
for name, h in runs.items():
    s = h.summary()
    clip = flush = ""
    if h.quant:
        clip = "  ".join(f"{s[k + '_blocks_clipped']:6.1%}" for k in ("x", "w", "dy"))
        flush = "  ".join(f"{s[k + '_flushed']:6.2%}" for k in ("x", "w", "dy"))
    print(f"{name:18} {s['final_loss']:10.4f} {s['final_accuracy']:8.1%}   {clip:26}  {flush}")

# %%
# Six loss curves on one axis lie on top of each other: draw each recipe's loss minus
# bf16-mixed's, step by step, so the gaps show.
base = np.array(runs["bf16-mixed"].loss)
fig, ax = plt.subplots(figsize=(8, 4))
ax.axhline(0.0, color="0.5", lw=0.8)
for name, h in runs.items():
    if name != "bf16-mixed":
        ax.plot(np.array(h.loss) - base, label=name)
ax.set_xlabel("step")
ax.set_ylabel("loss minus bf16-mixed's loss")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
ax.set_title(f"The same network under six recipes (bf16-mixed: the line at 0, "
             f"final loss {base[-1]:.4f})", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the table row by row: per-tensor FP8 clips whole tensors (a "block" is the
# tensor) whenever a tensor's amax outgrows its history, and flushes little, since one
# scale per tensor suits these well-conditioned values. MXFP8 with rounded-up scales
# clamps nothing; the OCP floor rule clamps a share of the blocks every step. NVFP4
# clamps about half of its blocks a little (the UE4M3 rounding of the scale) and
# flushes a few per cent of the activations and weights to zero, and far more of the
# gradients. The final losses differ in the third decimal: on a task this small every
# recipe trains.

# %% [markdown]
# ## Delayed scaling lags behind a growing tensor
#
# A delayed scale comes from the amaxes of *earlier* steps. While the weights grow, each
# step's amax exceeds the history's, and the top of the tensor is clamped. A shorter
# history does not help here: the scale of step t never sees the amax of step t. Below,
# the fraction of weight tensors clipped per step, and the scale of the first layer's
# weight, for histories of 1 and 1024 steps.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for length in (1, 1024):
    policy = dataclasses.replace(amp.Policy.named("fp8-delayed"),
                                 operands=amp.DelayedScaling(history=length))
    model = nn.mlp([16, 32, 4], rng=0)
    h = amp.train(model, data, policy, STEPS, lr=LR)
    axes[0].plot([q["w"]["blocks_clipped"] for q in h.quant], label=f"history {length}")
    print(f"history {length:4}: weight tensors clipped in {h.summary()['w_blocks_clipped']:.0%} "
          f"of the quantizations, final loss {h.final_loss:.4f}")
axes[0].set_xlabel("step")
axes[0].set_ylabel("fraction of weight tensors clipped")
axes[0].legend(loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2, frameon=False)
w = [np.abs(layer.weight.value.values).max() for layer in model.layers
     if isinstance(layer, nn.Linear)]
axes[1].bar(["layer 1", "layer 2"], w)
axes[1].set_ylabel("final weight amax")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Why NVFP4 rounds its gradients stochastically
#
# NVFP4 holds only 0, 0.5, 1, 1.5, 2, 3, 4, 6 times a block's scale: a gradient below a
# quarter of its block's scale rounds to zero to nearest, and the others move to the
# nearest of a few steps, with errors that do not cancel in a sum. Stochastic rounding
# (to one of the two neighbours, with probabilities that make it exact on average)
# keeps sums right on average. Here is the logit gradient of the untrained network
# (FP32), quantized along the batch as the weight-gradient product does, and its column
# sums (the bias gradient, and what `x.T @ dy` adds up) against the exact ones.

# %%
model = nn.mlp([16, 32, 4], rng=0)
xs, labels = data
with lp.context(matmul="fp32"):
    dz = nn.softmax_cross_entropy_backward(model(lp.tensor(xs, "fp32")), labels).values
exact = dz.sum(axis=0)

def sum_error(q):
    return np.abs(q.dequantize().sum(axis=0) - exact).max() / np.abs(exact).max()

rne = mx.quantize(dz, "nvfp4", axis=0)
print(f"nonzero gradients flushed to zero: RNE {np.mean((rne.dequantize() == 0) & (dz != 0)):.1%}")
print(f"column sums, RNE: relative error {sum_error(rne):.4f}")
draws = [mx.quantize(dz, "nvfp4", axis=0, mode="sr", rng=seed) for seed in range(64)]
print(f"column sums, SR, one draw: relative error {np.mean([sum_error(q) for q in draws]):.4f}"
      " (typical)")
mean = np.mean([q.dequantize() for q in draws], axis=0)
print(f"column sums, SR, mean of 64 draws: relative error "
      f"{np.abs(mean.sum(axis=0) - exact).max() / np.abs(exact).max():.4f}")

# %% [markdown]
# One stochastically rounded draw is noisier than rounding to nearest, but its errors
# average out over draws (over the steps of a training run), where the nearest-even
# errors stay.
