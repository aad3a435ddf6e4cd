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
# # 4. Mixed-precision training
#
# A small network trained with every forward and backward operation emulated in FP16 or
# BF16 (`lowprec.amp`, `lowprec.nn`): where FP16 gradients underflow, how dynamic loss
# scaling rescues them, why BF16 weights lose small updates, and what FP32 master weights
# and stochastic rounding of the updates buy. Every number below is computed as the
# notebook runs (see also [the documentation page](../docs/mixed-precision.md)).

# %%
import numpy as np
import matplotlib.pyplot as plt
import lowprec as lp
import dataclasses
from lowprec import amp, nn

data = amp.blobs(64, 8, 4, seed=0)          # 4 Gaussian clusters in 8-D, 64 points
STEPS, LR = 60, 0.02

def run(policy, weight=1.0, **kwargs):
    """Train a fresh 8-16-4 MLP; the loss is weighted by `weight`, the learning rate
    divided by it (in FP32, a power-of-two weight changes nothing, bit for bit)."""
    return amp.train(nn.mlp([8, 16, 4], rng=0), data, policy, STEPS, lr=LR / weight,
                     loss_weight=weight, **kwargs)


# %% [markdown]
# ## How small are the gradients?
#
# FP16 has 5 exponent bits: its smallest normal value is 2**-14 and its smallest
# subnormal 2**-24; at or below 2**-25 a value rounds to zero. Here are the gradients of the
# untrained network in FP32, with the loss weighted by 2**-18 (a small term of a larger
# loss, or a mean over many more elements), against those thresholds: the gradient of
# the logits, where the backward pass starts, and the weight gradients it leads to;
# then the same after a loss scale of 2**16. In an FP16 backward pass a logit gradient
# that rounds to zero takes its share of every weight gradient with it.

# %%
W = 2.0**-18
model = nn.mlp([8, 16, 4], rng=0)
x, labels = data
with lp.context(matmul="fp32"):
    logits = model(lp.tensor(x, "fp32"))
    dz = nn.softmax_cross_entropy_backward(logits, labels, W)
    model.backward(dz)
grads = {"logit gradients": np.abs(np.asarray(dz)).ravel(),
         "weight gradients": np.concatenate([np.abs(np.asarray(p.grad)).ravel()
                                             for p in model.parameters()])}
for name, g in grads.items():
    print(f"{name:16}: {np.mean(g <= 2.0**-25):6.1%} at most 2**-25 (zero in FP16), "
          f"{np.mean(g < 2.0**-14):6.1%} below 2**-14 (subnormal); "
          f"after scaling by 2**16: {np.mean(g * 2.0**16 <= 2.0**-25):.1%}")

fig, ax = plt.subplots(figsize=(8, 4))
bins = np.arange(-36, 2)
for name, g in grads.items():
    ax.hist(np.log2(g[g > 0]), bins=bins, histtype="step", lw=1.5, label=name)
    ax.hist(np.log2(g[g > 0] * 2.0**16), bins=bins, histtype="step", lw=1.5, ls="-.",
            label=name + " x 2**16")
ax.axvline(-24, color="k", ls="--", label="FP16 smallest subnormal, 2**-24")
ax.axvline(-14, color="k", ls=":", label="FP16 smallest normal, 2**-14")
ax.set_xlabel("log2 |gradient|")
ax.set_ylabel("number of elements")
ax.set_title("Gradients (loss weight 2**-18) against FP16's range")
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## FP16 with and without loss scaling
#
# `fp16-mixed` computes in FP16 and keeps FP32 master weights; without loss scaling the
# small gradients underflow on their way back through the network. `GradScaler` (PyTorch's
# rules: start at 2**16, halve and skip the step on inf/NaN, double after
# `growth_interval` clean steps) multiplies the loss before the backward pass and divides
# the gradients after it.

# %%
fp32 = run("fp32")
plain = run("fp16-mixed", W)
scaled = run("fp16-mixed", W, scaler=amp.GradScaler())
for name, h in [("fp32", fp32), ("fp16-mixed, no scaling", plain), ("fp16-mixed + GradScaler", scaled)]:
    print(f"{name:24} final loss {h.final_loss:.4f}   weight-gradient zeros {np.mean(h.grad_zero):.1%}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for name, h in [("fp32", fp32), ("fp16-mixed, no scaling", plain), ("fp16-mixed + GradScaler", scaled)]:
    ax1.plot(h.loss, label=name)
    ax2.plot(h.grad_zero, label=name)
ax1.set_xlabel("step"); ax1.set_ylabel("training loss (cross-entropy)")
ax1.set_title("Loss, gradients 2**18 times smaller")
ax2.set_xlabel("step"); ax2.set_ylabel("fraction of weight-gradient elements = 0")
ax2.set_title("Gradients lost to underflow")
ax1.legend(); ax2.legend()
fig.tight_layout()

# %% [markdown]
# ## The scale finds its level
#
# Started far too high (2**40), the scaled gradients overflow FP16: each such step is
# skipped and the scale halved, until the gradients fit; then it grows again after every
# `growth_interval` clean steps (10 here, 2000 by default) and backs off whenever it
# overflows.

# %%
h = run("fp16-mixed", W, scaler=amp.GradScaler(init_scale=2.0**40, growth_interval=10))
skipped = np.flatnonzero(h.skipped)
print("skipped steps:", skipped.tolist())
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.plot(np.log2(h.scale), drawstyle="steps-post", label="loss scale")
ax.plot(skipped, np.log2(np.array(h.scale))[skipped], "rx", label="skipped step (inf/NaN)")
ax.set_xlabel("step"); ax.set_ylabel("log2(loss scale)")
ax.set_title("Dynamic loss scaling from init_scale = 2**40")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## BF16: no underflow, but lost updates
#
# BF16 has FP32's exponent range, so gradients do not underflow and no loss scaling is
# needed; but it has 8 bits of precision, so a weight near 1 moves in steps of 2**-8 or
# 2**-7, and an update below half of that rounds back to the weight. With BF16 weights
# (`"bf16"`), many updates are lost at every step; FP32 master weights (`"bf16-mixed"`)
# keep them; stochastic rounding of the update (`update="sr"`) keeps them on average.

# %%
pure = run("bf16")
mixed = run("bf16-mixed")
sr = run(dataclasses.replace(amp.Policy.named("bf16"), update="sr"))
runs = [("fp32", fp32), ("bf16", pure), ("bf16-mixed", mixed), ("bf16 + SR", sr)]
for name, h in runs:
    print(f"{name:11} final loss {h.final_loss:.4f}   updates left unchanged {np.nanmean(h.unchanged):.1%}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for name, h in runs:
    ax1.plot(np.array(h.loss) - np.array(fp32.loss), label=name)
    ax2.plot(h.unchanged, label=name)
ax1.set_xlabel("step"); ax1.set_ylabel("training loss minus FP32's")
ax1.set_title(f"Loss against FP32, SGD with lr = {LR}")
ax2.set_xlabel("step"); ax2.set_ylabel("fraction of weights with g != 0 left unchanged")
ax2.set_title("Updates rounded away")
ax1.legend(); ax2.legend()
fig.tight_layout()

# %% [markdown]
# The gap is small after 60 steps and grows with training: the lost updates are the
# ones that are small relative to their weight, and they are lost every step. The test
# suite (`tests/test_amp.py`) measures the same effects on a longer run.
