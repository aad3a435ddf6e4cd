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
# # 2. Rounding and stochastic rounding
#
# `lp.round(x, fmt, mode)` rounds each exact input value once to a value of `fmt`. The
# representable set is fixed; the mode only chooses which neighbour an input goes to.
# This notebook draws the seven modes, shows why round-to-nearest loses small updates
# to a large sum, and how stochastic rounding keeps them on average.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lowprec as lp

# %% [markdown]
# ## The modes on FP4
#
# FP4 (E2M1) has only 15 distinct values, so the staircases are easy to see.

# %%
x = np.linspace(-3.2, 3.2, 1281)
modes = ["rne", "rna", "rz", "ru", "rd", "ro"]
fig, axes = plt.subplots(2, 3, figsize=(11, 6), sharex=True, sharey=True)
for ax, mode in zip(axes.flat, modes):
    ax.plot(x, x, color="0.8", lw=1)
    ax.plot(x, lp.round(x, "fp4", mode), lw=1.5)
    ax.set_title(f"mode = {mode!r}")
    ax.grid(alpha=0.3)
for ax in axes[1]:
    ax.set_xlabel("input x")
for ax in axes[:, 0]:
    ax.set_ylabel("lp.round(x, 'fp4', mode)")
fig.suptitle("The deterministic rounding modes on FP4 (E2M1)")
fig.tight_layout()

# %% [markdown]
# Ties are where the nearest modes differ: `rne` sends a tie to the neighbour with an even
# last bit, `rna` away from zero. Round to odd (`ro`) sends every inexact input to the
# neighbour whose last bit is 1.

# %%
ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
for mode in ("rne", "rna", "ro"):
    print(f"{mode:4}", lp.round(ties, "fp4", mode))

# %% [markdown]
# ## Stochastic rounding is unbiased
#
# With `mode="sr"` an input between neighbours `down < x < up` rounds up with
# probability `(x - down) / (up - down)`, so the expected result is `x` itself.

# %%
x = 0.3                                    # between FP4's 0 and 0.5
draws = lp.round(np.full(100_000, x), "fp4", "sr", rng=0)
print("values drawn:", np.unique(draws), " mean:", draws.mean(), " P(up) =", (draws == 0.5).mean())
print(lp.explain(x, "fp4", "sr", rng=0))

# %% [markdown]
# ## Adding small numbers to a large sum
#
# Add 0.01 (rounded to BF16) a thousand times, rounding every addition to BF16
# (`lp.add` is correctly rounded). With round to nearest the sum stops at 4: there BF16's
# spacing is 2**-5 = 0.03125, and adding 0.01, less than half of it, changes nothing.
# Stochastic rounding keeps the sum right on average.

# %%
steps, trials = 1000, 16
step = lp.round(0.01, "bf16")
rng = np.random.default_rng(1)
runs = {mode: np.zeros((steps + 1, trials)) for mode in ("rne", "rz", "sr")}
for mode, acc in runs.items():
    for i in range(steps):
        acc[i + 1] = lp.add(acc[i], step, "bf16", mode=mode, rng=rng)
exact = step * np.arange(steps + 1)
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.plot(exact, color="k", lw=2, label="exact")
ax.plot(runs["rne"][:, 0], label="rne")
ax.plot(runs["rz"][:, 0], label="rz")
ax.plot(runs["sr"], color="tab:green", alpha=0.3, lw=1)
ax.plot(runs["sr"].mean(axis=1), color="tab:green", label=f"sr (mean of {trials} runs, and each run)")
ax.set_xlabel("number of additions")
ax.set_ylabel("running sum in BF16")
ax.set_title("Summing 0.01 in BF16: round to nearest stagnates, stochastic rounding does not")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()
print("final sums: exact", exact[-1], " rne", runs["rne"][-1, 0], " rz", runs["rz"][-1, 0],
      " sr mean", runs["sr"][-1].mean())


# %% [markdown]
# ## Stochastic rounding with few random bits
#
# Hardware draws only a few random bits. With `sr_bits=r` an input rounds up with
# probability `floor(f * 2**r) / 2**r`, where `f` is its fraction of the gap, so a
# remainder below `2**-r` of the gap never rounds up. Past 4 the gap is 2**-5 and the
# step 0.01001 is 0.32 of it: one random bit gives P(up) = floor(0.64) / 2 = 0, and
# the sum stops at 4 as with round to nearest. With two bits it rounds up with
# probability 1/4 instead of 0.32, so it climbs more slowly, and past 8, where the step is
# 0.16 of the gap, floor(0.64) / 4 = 0: it can never pass 8.

# %%
def final_sum(sr_bits, trials=16, seed=2):
    rng = np.random.default_rng(seed)
    acc = np.zeros(trials)
    for _ in range(steps):
        acc = lp.add(acc, step, "bf16", mode="sr", rng=rng) if sr_bits is None else \
            lp.round(acc + step, "bf16", "sr", rng=rng, sr_bits=sr_bits)
    return acc.mean()

bits = [1, 2, 3, 4, 6, 8, 12]
sums = [final_sum(r) for r in bits]
print({r: round(float(v), 3) for r, v in zip(bits, sums)})
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(bits, sums, "o-", label="sr with r random bits")
ax.axhline(final_sum(None), color="tab:green", ls="--", label="sr with 53 bits")
ax.axhline(exact[-1], color="k", label="exact")
ax.set_xlabel("random bits r (sr_bits)")
ax.set_ylabel(f"sum after {steps} additions (mean)")
ax.set_title("Few random bits bias stochastic rounding down")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()

# %% [markdown]
# (`acc + step` is exact in float64, as both are BF16 values of nearby magnitude, so
# `lp.round` of it is one correctly rounded addition, like `lp.add`.)
#
# ## Counting what went wrong: flags
#
# `lp.flags()` counts, per element, IEEE 754's exceptions. How many small gradients
# underflow in FP16?

# %%
grads = np.random.default_rng(3).standard_normal(100_000) * 1e-4
with lp.flags() as f:
    g16 = lp.round(grads, "fp16")
print(f)
below = np.abs(grads) < 2.0**-14                 # FP16's smallest normal
# Tininess after rounding: rounded to 11 bits with no lower exponent limit, inputs from
# 2**-14 - 2**-26 (the midpoint below 2**-14 at that precision) up reach 2**-14.
not_tiny = below & (np.abs(grads) >= 2.0**-14 - 2.0**-26)
print("inputs below 2**-14:", np.count_nonzero(below), "of", grads.size)
print("  rounded to 0 in FP16:", np.count_nonzero(below & (g16 == 0)))
print("  rounded up to 2**-14 in FP16:", np.count_nonzero(below & (np.abs(g16) == 2.0**-14)))
print("  not tiny after rounding:", np.count_nonzero(not_tiny))
print("underflow = below 2**-14 and tiny after rounding (all inexact here):",
      np.count_nonzero(below) - np.count_nonzero(not_tiny))

# %% [markdown]
# Underflow means *tiny and inexact*, with tininess detected after rounding (as on x86):
# an input is tiny when, rounded to the format's precision with an unbounded exponent
# range, it is still below the smallest normal. So an input within 2**-26 below 2**-14
# does not underflow, while one a little further below, which FP16's coarser subnormal
# grid also rounds up to 2**-14, does. An exact subnormal result never underflows. `subnormals=False` flushes results below the smallest
# normal (and counts them as `flushed`); `saturate=True` clamps overflow to ±max.

# %%
print(lp.round([3e-5, 1e-7], "fp16"), lp.round([3e-5, 1e-7], "fp16", subnormals=False))
print(lp.round([7e4, -1e6], "fp16"), lp.round([7e4, -1e6], "fp16", saturate=True))
print(lp.round(500.0, "e4m3"), lp.round(500.0, "e4m3", saturate=True), lp.round(500.0, "fp4"))

# %% [markdown]
# ## IEEE P3109's formats and projection
#
# The P3109 working group's Interim Report v4.0 defines the family Binary{K, P, Σ, Δ}:
# K bits, precision P, signed or unsigned, finite or extended (±inf) domain. Every
# format has one NaN, no -0, and subnormals. `lowprec.p3109` builds them as
# `lp.Format`s. Here is the K = 8 family, signed and extended, one row per P.

# %%
from lowprec import p3109

print(f"{'format':<13}{'bias':>6}{'max':>12}{'min normal':>13}{'min subnormal':>15}")
for p in range(1, 8):
    f = p3109.format(8, p)
    print(f"{f.name:<13}{int(f.bias):>6}{f.max:>12.5g}{f.smallest_normal:>13.3g}"
          f"{f.smallest_subnormal:>15.3g}")
print("unsigned, finite:", [(p3109.format(8, p, False, 'finite').name,
                             p3109.format(8, p, False, 'finite').max) for p in (1, 4, 8)])

# %% [markdown]
# `p3109.project(x, fmt, rounding, saturation)` is the report's projection, returning
# code points. The three saturation modes differ only past the finite range. SatFinite
# clamps everything, infinities included. SatPropagate clamps finite overflow but keeps
# ±inf. SatNone lets the rounding direction decide between the largest finite value
# and inf.

# %%
f = p3109.format(8, 3)                     # Binary8p3se, largest finite 49152
x = np.array([60000.0, 1e6, np.inf, -1e6, -np.inf])
print("input:".ljust(34), x)
for rounding in ("NearestTiesToEven", "TowardZero"):
    for sat in p3109.SATURATIONS:
        print(f"{rounding:>18} {sat:<13}   ", lp.decode(p3109.project(x, f, rounding, sat), f))

# %% [markdown]
# ## StochasticA, B and C: what they do to an average
#
# The report's stochastic roundings take N caller-supplied random bits R and round a
# value whose fraction between its two neighbours is nu away from the lower one:
#
# - StochasticA rounds up when floor(nu * 2**N) + R >= 2**N;
# - StochasticB when floor(nu * 2**(N+1)) + 2R + 1 >= 2**(N+1);
# - StochasticC when RNITE(nu * 2**N) + R >= 2**N.
#
# Averaging over every R in [0, 2**N) gives each mode's expected value. With few bits,
# A truncates nu to N bits, so it is biased down by up to 2**-N. B and C round nu to
# N bits to nearest (B from nu's first N + 1 bits, ties up; C ties to even), an error
# of at most 2**-(N+1) either way. All three approach the value as N grows.

# %%
x = 1.1                                     # between 1.0 and 1.25: nu = 0.4
print("N   mean A     mean B     mean C     (x = 1.1)")
for n in range(1, 7):
    r = np.arange(2 ** n)
    means = [lp.decode(p3109.project(np.full(r.size, x), f, mode, random_bits=r,
                                     n_bits=n), f).mean() for mode in p3109.STOCHASTIC]
    print(n, "  ".join(f"{m:.6f}" for m in means))
