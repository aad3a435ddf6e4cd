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
# # 6. Summation
#
# A sum of `n` numbers in a format with unit roundoff `u` (`2**-11` for FP16, `2**-8`
# for BF16, `2**-24` for FP32) costs `n - 1` roundings, and the order in which they are
# done decides how the errors add up. `lp.sum(x, fmt, order=...)` rounds every
# addition to `fmt` in one of three orders:
#
# - `"sequential"`: `((x0 + x1) + x2) + ...`, the textbook recursive sum. Its
#   worst-case relative error bound is about `(n - 1) u` (for terms of one sign);
#   rounding errors that behave like random ones give about `sqrt(n) u` instead
#   (Higham and Mary's probabilistic bound, 2019).
# - `"pairwise"`: sums of pairs, then of pairs of those, ... (`log2(n)` levels, so a
#   bound of about `log2(n) u`); NumPy's own `np.sum` order.
# - `"kahan"`: compensated summation, which carries each addition's rounding error
#   into the next one; its bound is about `2u`, whatever `n` (for `n u` well below 1).
#
# Every number below is computed as the notebook runs.

# %%
import math

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

import lowprec as lp

# %% [markdown]
# ## Error against n
#
# Random positive data: entries uniform in [0, 1), rounded to the format first (so
# that the terms are values of the format and only the additions err), 8 seeds per
# format. The reference is `math.fsum` of the same terms: the exact sum correctly
# rounded to float64, whose own error (at most `2**-53` relative) is far below any
# `u` here. The sums of the first `n` terms, for `n = 8, 16, ..., 65536`.

# %%
formats = [lp.FP16, lp.BF16, lp.FP32]
orders = ["sequential", "pairwise", "kahan"]
ns = 2 ** np.arange(3, 17)
seeds = 8
errors = {}                                   # (format, order) -> array (len(ns), seeds)
for fmt in formats:
    x = lp.round(np.random.default_rng(0).random((ns[-1], seeds)), fmt)
    # math.fsum: the correctly rounded float64 value of the exact sum of its inputs.
    exact = np.array([[math.fsum(x[:n, j]) for j in range(seeds)] for n in ns])
    for order in orders:
        sums = np.array([lp.sum(x[:n], fmt, axis=0, order=order) for n in ns])
        errors[fmt.name, order] = np.abs(sums - exact) / exact

print("mean relative error, in units of u, for n = " + ", ".join(map(str, ns[::3])))
for (name, order), e in errors.items():
    u = lp.format(name).unit_roundoff
    print(f"{name:5} {order:10} " + "  ".join(f"{m / u:8.3g}" for m in e.mean(axis=1)[::3]))

# %%
styles = {"sequential": ("tab:red", "o"), "pairwise": ("tab:blue", "s"),
          "kahan": ("tab:green", "^")}
fig, axes = plt.subplots(1, 3, figsize=(13, 4.5), sharex=True)
for ax, fmt in zip(axes, formats):
    u = fmt.unit_roundoff
    for order in orders:
        colour, marker = styles[order]
        e = errors[fmt.name, order]
        ax.plot(np.repeat(ns, seeds), np.maximum(e, u / 2**8).ravel(), marker, color=colour,
                alpha=0.25, ms=3, ls="none")
        ax.plot(ns, np.maximum(e.mean(axis=1), u / 2**8), marker=marker, color=colour,
                label=f"{order} (mean of {seeds})")
    ax.plot(ns, ns * u, "k--", lw=1, label="n u (worst case)")
    ax.plot(ns, np.sqrt(ns) * u, "k:", lw=1.5, label="sqrt(n) u (random errors)")
    ax.axhline(u, color="0.6", lw=1, label="u")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(u / 2**8, 2)
    ax.set_title(f"{fmt.name} (u = 2**{int(np.log2(u))})")
    ax.set_xlabel("n (number of terms)")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("relative error of the sum")
axes[0].legend(fontsize=8, loc="upper left")
fig.suptitle("Summing n uniform [0, 1) values: error against n (faint: each seed; "
             "an error 0 is drawn at u / 2**8)")
fig.tight_layout()

# %% [markdown]
# The sequential sum's error grows like `sqrt(n) u` (a little below it), far under the
# worst case `n u`, until the running sum is so large that half its spacing exceeds
# the terms: then adding a term changes nothing (the sum *stagnates*) and the error
# jumps towards 1. With terms below 1 that happens once the sum's spacing reaches 2, at
# `2 / eps` (a sum of 2048 in FP16, 256 in BF16; FP32 needs far more terms than
# drawn here). The pairwise sum adds numbers of similar size at every level and stays
# near `u`; Kahan's stays below it: one rounding of the exact sum, the best any
# result in the format can do, already costs up to `u / 2`.

# %%
for fmt in (lp.FP16, lp.BF16):
    x = lp.round(np.random.default_rng(1).random(ns[-1]), fmt)
    s = lp.cumsum(x, fmt)                     # every partial sum of the sequential order
    last = int(np.flatnonzero(s[1:] != s[:-1])[-1]) + 2   # the last term that changed it
    spacing = 2.0 ** math.floor(math.log2(s[-1])) * fmt.eps
    print(f"{fmt.name}: the sum last changes at term {last}, reaching {s[-1]}, where the "
          f"spacing is {spacing} and every term (below 1) is at most half of it; after "
          f"{ns[-1]} terms the exact sum is {math.fsum(x):.1f}")

# %% [markdown]
# ## The harmonic series stagnates
#
# The harmonic series `1 + 1/2 + 1/3 + ...` diverges, but summed in a floating-point
# format it stops growing: once `1/n` is below half the spacing at the running sum,
# adding it rounds back to the sum. Here each `1/k` is rounded into the format and
# each addition is rounded, left to right; `lp.cumsum` gives every partial sum at once.
# `n` is the first term whose addition leaves the sum unchanged.

# %%
def stagnation(partial):
    """The first n (counting terms from 1) whose addition left the sum unchanged,
    and the sum there; the terms decrease, so it never changes again."""
    n = int(np.flatnonzero(partial[1:] == partial[:-1])[0]) + 2
    return n, float(partial[n - 1])

k = np.arange(1, 2**22 + 1)
found = {}
for fmt in (lp.FP16, lp.BF16, lp.FP32):
    partial = lp.cumsum(lp.round(1.0 / k, fmt), fmt)
    found[fmt.name] = stagnation(partial)
    n, s = found[fmt.name]
    spacing = 2.0 ** math.floor(math.log2(s)) * fmt.eps
    term = float(lp.round(1.0 / n, fmt))
    relation = "below" if term < spacing / 2 else "a tie, exactly"
    print(f"{fmt.name:5} stagnates at {s!r} after n = {n} terms: there the spacing is "
          f"2**{int(math.log2(spacing))}, and 1/{n} in {fmt.name}, {term:.6g}, is {relation} "
          f"half of it, {spacing / 2:.6g}")

# %% [markdown]
# FP32's last term is a tie, exactly half the spacing: a tie rounds to the neighbour
# with an even last bit, and the sum staying put says that neighbour is the sum itself.
#
# ### An independent computation
#
# The same sums without lowprec: NumPy's float16 for FP16, ml_dtypes' bfloat16 with
# each addition rounded explicitly for BF16, and NumPy's float32 cumulative sum (a
# sequential loop in float32) for FP32.

# %%
def harmonic_float16():
    s, n = np.float16(0), 0
    while True:
        n += 1
        # 1/n in float64 rounds to the float16 of the exact 1/n: it is never within
        # 2**-53 relative of a float16 midpoint (that needs n * M == 2**e for an odd
        # 12-bit M, impossible). NumPy adds float16s in float32 and rounds once: the
        # exact sum of a value below 8 and a term of at least 2**-10 fits in 24 bits.
        new = s + np.float16(1.0 / n)
        if new == s:
            return n, float(s)
        s = new


def harmonic_bfloat16():
    bf16 = ml_dtypes.bfloat16
    s, n = bf16(0), 0
    while True:
        n += 1
        # float64(1/n) rounds to bfloat16 as the exact 1/n does (as above, M of 9 bits);
        # the sum of two bfloat16 values below 8 and above 2**-8 has at most 18 bits, exact
        # in float64 (and in float32, should ml_dtypes convert through it),
        # so bf16(...) is one rounding of the exact sum.
        new = bf16(float(s) + float(bf16(1.0 / n)))
        if new == s:
            return n, float(s)
        s = new


independent = {"FP16": harmonic_float16(), "BF16": harmonic_bfloat16(),
               # np.cumsum of float32 values accumulates in float32, one rounding per step.
               "FP32": stagnation(np.cumsum((1.0 / k).astype(np.float32), dtype=np.float32))}

# Higham and Pranesh, "Simulating low precision floating-point arithmetic",
# SIAM J. Sci. Comput. 41(5), 2019, Section 6: (n, stagnation value).
published = {"FP16": (513, 7.0859375), "BF16": (65, 5.0625)}

print(f"{'format':6} {'lowprec':>30} {'independent':>30} {'published':>30}")
for name in ("FP16", "BF16", "FP32"):
    cells = [found[name], independent[name], published.get(name)]
    print(f"{name:6} " + " ".join(f"{'-' if c is None else f'n = {c[0]}, {c[1]}':>30}"
                                  for c in cells))
for name in ("FP16", "BF16", "FP32"):
    assert found[name] == independent[name], (name, found[name], independent[name])
for name in published:
    assert found[name] == published[name], (name, found[name], published[name])

# %% [markdown]
# lowprec, the independent loops and the paper agree on every figure. (The paper's table
# has no FP32 entry to compare with here; lowprec and NumPy agree on it.)

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
m = 2**12
exact = np.cumsum(1.0 / k[:m])                # float64: error about 1e-13, invisible here
ax.plot(k[:m], exact, color="k", lw=2, label="exact (float64)")
for fmt, colour in ((lp.FP16, "tab:orange"), (lp.BF16, "tab:purple")):
    partial = lp.cumsum(lp.round(1.0 / k[:m], fmt), fmt)
    n, s = found[fmt.name]
    ax.plot(k[:m], partial, color=colour, label=f"{fmt.name}, every addition rounded")
    ax.plot(n, s, "o", color=colour, ms=8, mfc="none")
    ax.annotate(f"stops at {s} after n = {n}", (n, s), textcoords="offset points",
                xytext=(-8, 8), ha="right", color=colour)
ax.set_xscale("log", base=2)
ax.set_xlabel("number of terms n")
ax.set_ylabel("partial sum of 1/k")
ax.set_title("The harmonic series in FP16 and BF16 stagnates")
ax.legend(loc="upper left")
ax.grid(alpha=0.3)
fig.tight_layout()

# %% [markdown]
# Pairwise or Kahan summation of the same terms does not stagnate this way: their
# additions are between numbers of similar size (pairwise) or carry the lost part
# along (Kahan).

# %%
for fmt in (lp.FP16, lp.BF16):
    n = 4 * found[fmt.name][0]
    terms = lp.round(1.0 / k[:n], fmt)
    print(f"{fmt.name}, first {n} terms: exact {math.fsum(terms):.4f}, " + ", ".join(
        f"{order} {lp.sum(terms, fmt, order=order)}" for order in orders))
