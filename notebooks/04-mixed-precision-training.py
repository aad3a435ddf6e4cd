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
# A small network learns to read handwritten digits (scikit-learn's bundled `digits`
# data: 8 x 8 images, 10 classes, no download) with every forward and backward
# operation emulated in FP16 or BF16 (`lowprec.amp`, `lowprec.nn`): why FP16 gradients
# underflow, how dynamic loss scaling rescues them, why BF16 weights lose small
# updates, and what FP32 master weights and stochastic rounding of the updates buy.
# Every number below is computed as the notebook runs (see also
# [the documentation page](../docs/mixed-precision.md)).

# %%
import dataclasses

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import lowprec as lp
from lowprec import amp, nn

digits = load_digits()
order = np.random.default_rng(0).permutation(len(digits.target))[:1024]
x = digits.data[order] / 16.0                # pixel intensities 0..16, scaled to [0, 1]
labels = digits.target[order]
data = (x, labels)
N, STEPS, LR = len(labels), 60, 0.3
print(f"{N} images of {x.shape[1]} pixels, {np.unique(labels).size} classes; "
      f"{np.mean(np.all(x == 0, axis=0)):.0%} of the pixels are 0 in every image")

# The FP32 baseline multiplies with matmul="exact": each product correctly rounded to
# FP32, FP32 at its best, and faster to emulate than FP32's accumulation loop.
FP32 = dataclasses.replace(amp.Policy.named("fp32"), matmul="exact")


def run(policy, weight=1.0, **kwargs):
    """Train a fresh 64-32-10 MLP on the 1024 images (full batch); the loss is weighted
    by `weight`, the learning rate divided by it (in FP32 a power-of-two weight
    changes nothing, bit for bit). Returns the History and the trained model."""
    model = nn.mlp([64, 32, 10], rng=0)
    h = amp.train(model, data, policy, STEPS, lr=LR / weight, loss_weight=weight,
                  progress=False, **kwargs)
    return h, model


# %% [markdown]
# ## How small are the gradients?
#
# The loss is the mean cross-entropy over the batch, so the backward pass starts from
# the gradient of the logits, `(softmax(z) - onehot(label)) / N`: each image's share is
# `1/N` of its own error. With `N = 1024` that is `2**-10` of numbers below 1: at
# initialisation, where every probability is about 1/10, the shares sit at about
# `2**-13.3`, near FP16's smallest normal `2**-14`; and the better an image is
# classified, the closer its probabilities get to 0 and 1, the smaller its share.
# FP16's smallest subnormal is `2**-24`, and a value of at most `2**-25` rounds to 0.
# Here are the gradients in FP32, before training and after it (Micikevicius et al.,
# "Mixed Precision Training", ICLR 2018, Fig. 3, draw the same for a large network).

# %%
def gradients(model, weight=1.0):
    """|logit gradients| and |weight gradients| of `model` on all the data, in FP32."""
    with lp.context(matmul="exact"):
        logits = model(lp.tensor(x, "fp32"))
        dz = nn.softmax_cross_entropy_backward(logits, labels, weight)
        model.backward(dz)
    return {"logit gradients": np.abs(np.asarray(dz)).ravel(),
            "weight gradients": np.concatenate([np.abs(np.asarray(p.grad)).ravel()
                                                for p in model.parameters()])}

fp32, trained = run(FP32)
snapshots = {"before training": gradients(nn.mlp([64, 32, 10], rng=0)),
             f"after {STEPS} FP32 steps": gradients(trained)}
for when, grads in snapshots.items():
    for name, g in grads.items():
        nz = g[g > 0]
        print(f"{when:20} {name:16}: median 2**{np.median(np.log2(nz)):6.1f}; "
              f"{np.mean(nz <= 2.0**-25):6.1%} at most 2**-25 (zero in FP16), "
              f"{np.mean(nz < 2.0**-14):6.1%} below 2**-14 (subnormal); "
              f"{np.mean(g == 0):.1%} exactly 0 in FP32")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
top = np.log2(lp.FP16.max)
bins = np.arange(-40, 17)
for ax, name in zip(axes, ["logit gradients", "weight gradients"]):
    for (when, grads), colour in zip(snapshots.items(), ("tab:blue", "tab:red")):
        g = grads[name]
        g = g[g > 0]
        ax.hist(np.log2(g), bins=bins, histtype="step", lw=1.8, color=colour, label=when)
        ax.hist(np.log2(g * 2.0**16), bins=bins, histtype="step", lw=1.2, ls="--",
                color=colour, label=when + ", x 2**16")
    ax.axvspan(-40, -25, color="0.85", label="zero in FP16 (at most 2**-25)")
    ax.axvspan(-25, -14, color="0.93", label="FP16 subnormals")
    ax.axvspan(top, 17, color="tab:red", alpha=0.15, label="overflow in FP16 (above max)")
    ax.axvline(-24, color="k", ls=":", lw=1)
    ax.axvline(-14, color="k", ls=":", lw=1)
    ax.set_title(f"{name} (the FP32 values), {grads[name].size} elements")
    ax.set_xlabel("log2 |gradient|  (dotted: 2**-24 and 2**-14)")
    ax.set_xlim(-40, 17)
    ax.set_ylabel("number of elements")
axes[0].legend(fontsize=8, loc="upper left")
fig.suptitle("Gradients of the mean loss over 1024 images against FP16's range; "
             "dashed: after a loss scale of 2**16")
fig.tight_layout()

# %% [markdown]
# Before training the logit gradients sit in a narrow peak at FP16's smallest normal
# (about 1/10 of `2**-10`); after training they have spread down through the subnormal
# range (fewer bits of precision), and some are below `2**-25`, where FP16 rounds them
# to 0 (the percentages above). The weight gradients sum 1024 such shares (in the
# matrix product's FP32 accumulator) and sit higher. A loss scale of `2**16` (dashed)
# moves everything 16 binades right, into FP16's normal range and below its max.
#
# ## FP16 with and without loss scaling
#
# `fp16-mixed` computes in FP16 (the logit gradients are rounded to FP16 before they
# go back through the network) and keeps FP32 master weights. `GradScaler` (PyTorch's
# rules: start at 2**16, halve and skip the step on inf/NaN, double after
# `growth_interval` clean steps) multiplies the loss before the backward pass and
# divides the gradients after it.
#
# With the loss as it is, the shares lost are those of images already well classified,
# and the weight gradients hardly change. Real losses are often far smaller per
# element: a language model averages its loss over the 2**20 or more tokens of a batch,
# a multi-task loss weights a term down, gradient accumulation divides the loss by the
# number of micro-batches. We stand for that with a loss weight `W = 2**-12` (each
# image's share is then `2**-22` of its error, as a token's in a batch of 4M tokens),
# and divide the learning rate by `W`, so that the FP32 run is the same bit for bit.
# In the histograms above, `W` moves every gradient 12 binades left: most logit
# gradients after training then lie in the grey region that FP16 rounds to 0. (Unlike
# in a larger batch, here the weight gradients shrink by `W` too.)

# %%
W = 2.0**-12
runs = {"fp32": fp32,
        "fp16-mixed": run("fp16-mixed")[0],
        "fp16-mixed + GradScaler": run("fp16-mixed", scaler=amp.GradScaler())[0],
        f"fp16-mixed, W = 2**{int(np.log2(W))}": run("fp16-mixed", W)[0],
        f"fp16-mixed, W = 2**{int(np.log2(W))}, + GradScaler":
            run("fp16-mixed", W, scaler=amp.GradScaler())[0]}
fp32_w = run(FP32, W)[0]
print("FP32 with W: loss curve identical to FP32's:", fp32_w.loss == fp32.loss)
for name, h in runs.items():
    gap = np.max(np.abs(np.array(h.loss) - np.array(fp32.loss)))
    print(f"{name:34} final loss {h.final_loss:.4f}  accuracy {h.final_accuracy:.1%}  "
          f"underflows/step {np.mean(h.grad_underflow):8.0f}  weight-gradient zeros "
          f"{np.mean(h.grad_zero):5.1%}  largest loss gap to FP32 {gap:.2g}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
looks = [("k", "-", None, 3.5), ("tab:blue", "--", "o", 1.5), ("tab:green", ":", "s", 1.5),
         ("tab:red", "-", None, 1.5), ("tab:orange", "-.", "^", 1.5)]
for i, ((name, h), (colour, ls, marker, lw)) in enumerate(zip(runs.items(), looks)):
    # Markers staggered (every 10th step, from step i) so that coinciding curves show.
    kw = dict(color=colour, ls=ls, lw=lw, marker=marker, markevery=(2 * i, 10), ms=5,
              label=name)
    ax1.plot(h.loss, **kw)
    ax2.plot(h.grad_zero, **kw)
ax1.set_xlabel("step"); ax1.set_ylabel("training loss (cross-entropy)")
ax1.set_title("Loss: every run but FP16 with W and no scaling\nlies on FP32's (thick black)")
ax2.set_xlabel("step"); ax2.set_ylabel("fraction of weight-gradient elements = 0")
ax2.set_title("Weight gradients that are 0\n(pixels blank in every image give FP32's)")
ax1.legend(fontsize=8); ax2.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# The printed gaps say how close each run stays to FP32: the runs drawn on top of the
# thick black curve coincide with it to the plotted resolution. Without scaling, the
# weighted FP16 run loses a growing share of its weight gradients to underflow and
# trains far worse, its loss jumping about: what survives is mostly the pull of the
# badly classified images, a biased direction taken with the full step. `GradScaler`
# brings it back onto FP32's curve. Unweighted, FP16
# underflows thousands of logit gradients per step (the underflow count) and still
# follows FP32: those shares were negligible.
#
# ## The scale finds its level
#
# Started far too high (2**40), the scaled gradients overflow FP16: each such step is
# skipped and the scale halved, until the gradients fit; then it grows again after every
# `growth_interval` clean steps (10 here, 2000 by default) and backs off whenever it
# overflows.

# %%
h, _ = run("fp16-mixed", W, scaler=amp.GradScaler(init_scale=2.0**40, growth_interval=10))
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
# needed; but it has 8 bits of precision, so a weight `w` moves in steps of
# `2**(floor(log2 |w|) - 7)`, and an update below half of that rounds back to `w`.
# With BF16 weights (`"bf16"`) many updates are lost at every step; FP32 master
# weights (`"bf16-mixed"`) keep them; stochastic rounding of the update
# (`update="sr"`) keeps them on average.

# %%
bf16 = {"fp32": fp32, "bf16": run("bf16")[0], "bf16-mixed": run("bf16-mixed")[0],
        "bf16 + SR": run(dataclasses.replace(amp.Policy.named("bf16"), update="sr"))[0]}
for name, h in bf16.items():
    print(f"{name:11} final loss {h.final_loss:.4f}   accuracy {h.final_accuracy:.1%}   "
          f"updates left unchanged {np.nanmean(h.unchanged):.1%}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
for (name, h), (colour, ls, marker, lw) in zip(bf16.items(), looks):
    kw = dict(color=colour, ls=ls, lw=lw if name != "fp32" else 2, marker=marker, ms=5,
              markevery=10, label=name)
    ax1.plot(np.array(h.loss) - np.array(fp32.loss), **kw)
    ax2.plot(h.unchanged, **kw)
ax1.set_xlabel("step"); ax1.set_ylabel("training loss minus FP32's")
ax1.set_title(f"Loss against FP32 (FP32 itself: the line at 0), SGD with lr = {LR}")
ax2.set_xlabel("step"); ax2.set_ylabel("fraction of weights with g != 0 left unchanged")
ax2.set_title("Updates rounded away")
ax1.legend(fontsize=8); ax2.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# With BF16 weights a large share of the updates is rounded away at every step (the
# printed fractions), and stochastic rounding drops about as many, but unbiased: on
# average it keeps them. In these few steps, at this learning rate, the loss does not
# suffer yet (the losses above): most of the progress comes from the large updates,
# which BF16 keeps; the loss differences are a few thousandths either way. The lost
# ones are those small relative to their weight, and their share grows as the updates
# shrink (right: it climbs step by step; `bf16-mixed` lies on FP32's line at 0, its
# master weights keep every update). Later in training, or with a smaller learning
# rate, they are most of them; the test suite (`tests/test_amp.py`) measures the cost
# on a longer run.
