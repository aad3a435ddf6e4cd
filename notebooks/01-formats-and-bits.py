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
# # 1. Formats and bits
#
# A binary floating-point number is a sign, an exponent and a significand:
# `(-1)**s * 2**e * 1.m`. A *format* fixes how many bits each part gets. This notebook
# compares the formats lowprec emulates, takes one number apart bit by bit, and draws
# where each format's values lie. Every number below is computed by lowprec as the
# notebook runs.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lowprec as lp

# %% [markdown]
# ## The formats side by side
#
# `eps` is the gap between 1 and the next value, `max` the largest finite value,
# `digits` the decimal digits NumPy's `finfo.precision` would report. The same table
# is `lowprec formats` at the shell.

# %%
from lowprec.teaching.cli import format_table
print(format_table(formats=["fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "fp6", "e3m2", "fp4"]))

# %% [markdown]
# BF16 keeps FP32's 8 exponent bits (so FP32's range) and gives up mantissa bits: it has
# 7 where FP16 has 10, so its `eps` is 8 times FP16's. FP16 has the finer grid but
# overflows past 65504.

# %%
for f in (lp.FP32, lp.FP16, lp.BF16):
    print(f"{f.name:5}  max {f.max:<12.6g} eps {f.eps:<10.6g} smallest subnormal {f.smallest_subnormal:.6g}")
print("BF16 eps / FP16 eps =", lp.BF16.eps / lp.FP16.eps)

# %% [markdown]
# ## One number, bit by bit
#
# `lp.explain` rounds a value and shows what a student draws on paper: the fields, the
# exact value of the result, its neighbours and the rounding error
# (`lowprec explain 0.1 --fmt bf16` at the shell).

# %%
print(lp.explain(0.1, "bf16"))

# %%
print(lp.explain(1e-6, "fp16"))   # below FP16's smallest normal: a subnormal

# %% [markdown]
# The fields are plain integers, and `lp.encode` / `lp.decode` go between values and bit
# patterns. Here is every pattern of FP4 (E2M1), the 4-bit format of OCP's MX
# specification:

# %%
patterns = np.arange(16)
values = lp.decode(patterns, "fp4")
sign, exponent, mantissa = lp.fields(patterns, "fp4")
for p, s, e, m, v in zip(patterns, sign, exponent, mantissa, values):
    print(f"{p:04b}  sign {s}  exponent {e:02b}  mantissa {m:b}  ->  {v:+}")

# %% [markdown]
# ## Where the values lie
#
# Every positive finite value of the 8-, 6- and 4-bit formats, from decoding every bit
# pattern. The values are evenly spaced within each power of two (a *binade*) and the
# spacing doubles from one binade to the next; the subnormals fill the gap to zero
# evenly.

# %%
small = ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"]
fig, ax = plt.subplots(figsize=(9, 3.5))
for row, name in enumerate(small):
    fmt = lp.format(name)
    v = lp.decode(np.arange(2 ** (fmt.bits - 1)), fmt)       # sign bit 0
    v = v[np.isfinite(v) & (v > 0)]
    ax.plot(v, np.full(v.size, row), "|", markersize=14)
ax.set_xscale("log")
ax.set_yticks(range(len(small)), [lp.format(n).name for n in small])
ax.set_xlabel("value (log scale)")
ax.set_ylabel("format")
ax.set_title("Every positive finite value of the FP8, FP6 and FP4 formats")
fig.tight_layout()

# %% [markdown]
# The relative spacing (gap to the next value divided by the value) is what rounding
# costs: at most half of it with round to nearest. Within a binade the gap is fixed, so
# the relative spacing falls from `eps` at the binade's bottom to just above `eps/2` at
# its top, and jumps back to `eps` at the next power of two: a saw-tooth (right, a few
# binades around 1, every value drawn). Over the whole range (left) there are too many
# binades to draw each tooth, so each binade is one step, at its largest relative
# spacing (at its bottom, `x = 2**e`), with its teeth shaded between that and half of
# it. In the subnormal range the gap stays that of the smallest normal binade, so the
# relative spacing climbs to 1 at the smallest subnormal: precision is lost.

# %%
names = ["fp16", "bf16", "e4m3", "e5m2"]
colours = dict(zip(names, ["tab:blue", "tab:orange", "tab:green", "tab:red"]))
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for name in names:
    fmt = lp.format(name)
    v = lp.decode(np.arange(2 ** (fmt.bits - 1)), fmt)
    v = np.unique(v[np.isfinite(v) & (v > 0)])
    rel = np.diff(v) / v[:-1]                           # relative spacing of every value
    bottoms = v[:-1] == 2.0 ** np.floor(np.log2(v[:-1]))  # the powers of two: binade bottoms
    x, r = np.append(v[:-1][bottoms], v[-1]), np.append(rel[bottoms], rel[bottoms][-1])
    ax1.step(x, r, where="post", color=colours[name], lw=1.5, label=fmt.name)
    ax1.fill_between(x, r, r / 2, step="post", color=colours[name], alpha=0.15, lw=0)
    zoom = (v[:-1] >= 2.0**-3) & (v[:-1] < 2.0**3)
    ax2.plot(v[:-1][zoom], rel[zoom], color=colours[name], lw=1.2,
             marker="o" if fmt.bits == 8 else None, ms=3, label=fmt.name)
for name in ("fp16", "bf16"):
    eps = lp.format(name).eps
    ax2.axhline(eps, color=colours[name], ls=":", lw=1)
    ax2.axhline(eps / 2, color=colours[name], ls=":", lw=1)
ax1.set_xscale("log"); ax1.set_yscale("log")
ax2.set_xscale("log", base=2)
ax1.set_title("the whole range: one step per binade (largest relative spacing),\n"
              "shaded down to half of it, where each binade's saw-tooth ends")
ax2.set_title("zoom, 2**-3 to 2**3: the saw-tooth of every value\n"
              "(dotted: eps and eps/2 of FP16 and BF16)")
for ax in (ax1, ax2):
    ax.set_xlabel("value x")
    ax.grid(alpha=0.3)
ax1.set_ylabel("relative spacing (next value - x) / x")
ax1.legend()
fig.suptitle("Relative spacing of FP16, BF16 and FP8 values")
fig.tight_layout()

# %%
for name in names:
    fmt = lp.format(name)
    print(f"{fmt.name:12} eps {fmt.eps:<9.4g} normal from {fmt.smallest_normal:<10.4g} "
          f"subnormal down to {fmt.smallest_subnormal:<10.4g} max {fmt.max:.4g}")

# %% [markdown]
# FP16's steps stop at its max, 65504, while BF16's run on to about 3.4e38; BF16's sit
# 8 times higher (3 fewer mantissa bits); below each format's smallest normal the
# relative spacing rises step by step to 1, at the smallest subnormal.
