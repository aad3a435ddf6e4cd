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
# # 3. Tensor Core matrix products
#
# A Tensor Core computes `D = A B + C` in *block FMAs*: for each output, `k` exact
# products are aligned to the largest exponent among them and `c`, truncated to `F`
# fraction bits, summed exactly, and rounded once (toward zero, for FP32 output). The
# parameters differ from GPU to GPU (Fasi, Higham, Mikaitis and Pranesh 2021; Khattak and
# Mikaitis 2025). `lp.matmul(a, b, model=..., in_fmt=...)` computes this bit for bit.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lowprec as lp

# %%
for name in ("v100", "a100", "h100", "b200"):
    p = lp.MODELS[name].for_format("fp16")
    print(f"{name:5} FP16 inputs: block k = {p.block:2}, F = {p.fraction_bits}, "
          f"FP32 output rounded {p.out_rounding!r}, Elim = {p.elim}")


# %% [markdown]
# ## The test vectors
#
# Inputs are FP16, the output FP32; each row is one 16-long dot product plus `c`
# (entries not listed are 0), shown as FP32 bit patterns. `2**-24` is FP16's smallest
# subnormal.

# %%
def hexbits(d):
    return f"{int(np.float32(d).view(np.uint32)):08x}"

def vector(values):
    v = np.zeros(16)
    v[:len(values)] = values
    return v

t = 2.0**-24
cases = {
    "D1": ([1], [1], -(1 - t)),
    "D3": ([1, 1], [1, -t], -1 + t),
    "D2": ([1] * 4, [t] * 4, 1 - t),
    "D5": ([1] * 4, [t] * 4, 1.0),
    "C1": ([1, 1], [2, 3 * t], 0.0),
    "C2": ([1, 1], [-2, -3 * t], 0.0),
    "D4c": ([1] * 4, [1] * 4, 1 + 2**-22 + 2**-23),
}
models = ["v100", "a100", "h100", "exact"]
print("id   " + "".join(f"{m:>10}" for m in models))
for name, (a, b, c) in cases.items():
    row = [lp.matmul(vector(a)[None, :], vector(b)[:, None], model=m, c=[[c]], in_fmt="fp16")[0, 0]
           for m in models]
    print(f"{name:4} " + "".join(f"{hexbits(d):>10}" for d in row))

# %% [markdown]
# ## V100's non-monotonic sum
#
# D2 and D5 differ only in `c`: with `c = 1 - 2**-24` V100 returns `1 + 2**-23`, with the
# *larger* `c = 1` it returns 1. With `c` below 1 the reference exponent is -1 and the
# four products `2**-24` survive the alignment to 23 fractional bits; with `c = 1` it is 0,
# and each product, now below the last kept bit, is truncated to 0. A100 keeps one more
# bit (F = 24) and is monotonic here. Sweep `c` over consecutive FP32 values around 1:

# %%
ones, tiny = np.ones((1, 4)), np.full((4, 1), 2.0**-24)
below = np.float32(1.0) - np.float32(2**-24) * np.arange(8, 0, -1)
above = np.float32(1.0) + np.float32(2**-23) * np.arange(0, 5)
cs = np.concatenate([below, above]).astype(np.float64)
fig, ax = plt.subplots(figsize=(8, 4.5))
for model, marker in (("exact", "o"), ("a100", "s"), ("v100", "x")):
    d = [lp.matmul(ones, tiny, model=model, c=[[c]], in_fmt="fp16")[0, 0] for c in cs]
    ax.plot((cs - 1) * 2**24, (np.array(d) - 1) * 2**24, marker=marker, label=model)
ax.set_xlabel("c - 1, in units of 2**-24")
ax.set_ylabel("d - 1, in units of 2**-24")
ax.set_title("d = c + 4 * 2**-24 on V100: a larger c can give a smaller d")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()

# %% [markdown]
# ## The models reproduce the published measurements
#
# Khattak and Mikaitis measured 5,000 random block FMAs on each GPU; the data ship with
# lowprec's tests. A model reproduces a row when its FP32 result has the GPU's bit
# pattern. The sequential FP32 model and one rounding of the exact result do not
# behave like the hardware.

# %%
import pathlib

data_dir = pathlib.Path("..") / "tests" / "data" / "tensorcore"
datasets = [("v100", "fp16"), ("a100", "fp16"), ("a100", "bf16"), ("h100", "fp16"), ("h100", "bf16")]
models = ["exact", "fp32", "v100", "a100", "h100"]
match = np.full((len(datasets), len(models)), np.nan)
for i, (gpu, fmt) in enumerate(datasets):
    data = np.load(data_dir / f"{gpu}_{fmt}.npz")
    as64 = lambda key: data[key].view(np.float32).astype(np.float64)
    a, b, c, d = as64("a"), as64("b"), as64("c"), data["d_fp32"]
    for j, model in enumerate(models):
        try:
            lp.MODELS[model].for_format(fmt)
        except ValueError:                      # V100 has no BF16
            continue
        out = lp.matmul(a[:, None, :], b[:, :, None], model=model, c=c[:, None, None], in_fmt=fmt)
        match[i, j] = np.mean(out[:, 0, 0].astype(np.float32).view(np.uint32) == d)
for (gpu, fmt), row in zip(datasets, match):
    print(f"{gpu} {fmt}: " + ", ".join(f"{m} {r:.1%}" for m, r in zip(models, row) if not np.isnan(r)))

fig, ax = plt.subplots(figsize=(9, 4))
width = 0.16
for j, model in enumerate(models):
    ax.bar(np.arange(len(datasets)) + (j - 2) * width, np.nan_to_num(match[:, j]), width, label=model)
ax.set_xticks(range(len(datasets)), [f"{g} {f}" for g, f in datasets])
ax.set_xlabel("measured data (GPU, input format), 5,000 rows each")
ax.set_ylabel("fraction of rows reproduced bit for bit")
ax.set_title("Which model reproduces which GPU")
# The legend beside the bars, where it hides none of them.
ax.legend(fontsize=8, title="model", loc="upper left", bbox_to_anchor=(1.01, 1.0))
fig.tight_layout()

# %% [markdown]
# ## Error against K
#
# Longer dot products accumulate more error. `lowprec.teaching.error_vs_k` measures the
# mean relative error of dot products of uniform [0, 1) vectors (inputs rounded to the
# format first, so only the accumulation is measured) against the exact result (also what
# `lowprec demo` prints). The outputs are FP32 values (FP16 for the `fp16` model), so
# the `exact` model, the exact result rounded once to FP32, is not at 0 but at FP32's
# own rounding error: the floor of any FP32 output. With terms of one sign, the Tensor
# Cores' truncations all point the same way and add up; the sequential FP32 loop rounds
# to nearest and its errors partly cancel; FP16 accumulation stagnates.

# %%
import lowprec.plot
from lowprec.teaching import error_vs_k, error_table

result = error_vs_k(ks=(16, 64, 256, 1024), formats=("fp16", "bf16"),
                    models=("exact", "fp32", "fp16", "v100", "a100", "h100"), trials=16, size=8)
print(error_table(result, "dot"))
axes = lowprec.plot.error_vs_k(result, "dot")

# %% [markdown]
# ## The models against each other
#
# The same FP16 product on different GPUs, with entries uniform in [0, 1): how often do
# two models agree bit for bit, and how far is each from the correctly rounded result,
# in units of the FP32 spacing (ulp) at that result? With terms of one sign, alignment
# truncation and round toward zero only ever lose magnitude, so every Tensor Core error
# has the same sign; wider blocks and more alignment bits (V100, A100, H100) shrink it.

# %%
rng = np.random.default_rng(0)
A = lp.round(rng.random((48, 256)), "fp16")
B = lp.round(rng.random((256, 48)), "fp16")
names = ["exact", "fp32", "v100", "a100", "h100"]
D = {m: lp.matmul(A, B, model=m, in_fmt="fp16") for m in names}
print("fraction of outputs equal, bit for bit:")
print("       " + "".join(f"{m:>7}" for m in names))
for m in names:
    print(f"{m:6} " + "".join(f"{np.mean(D[m] == D[n]):7.2f}" for n in names))

ulp = np.spacing(np.abs(D["exact"]).astype(np.float32)).astype(np.float64)
errors = {m: ((D[m] - D["exact"]) / ulp).ravel() for m in names[1:]}
u = lp.FP32.unit_roundoff
relative = {m: ((D[m] - D["exact"]) / np.abs(D["exact"]) / u).ravel() for m in names[1:]}
print("mean error in ulps:", {m: round(float(e.mean()), 1) for m, e in errors.items()})
print("mean relative error in units of u = 2**-24:",
      {m: round(float(e.mean()), 1) for m, e in relative.items()})
# The power of two nearest the results' median, and how many results lie on each side.
edge = 2.0 ** np.round(np.log2(np.median(D["exact"])))
above = np.mean(D["exact"] >= edge)
print(f"results from {D['exact'].min():.2f} to {D['exact'].max():.2f}: "
      f"{1 - above:.0%} below {edge:g}, where the FP32 ulp is {np.spacing(np.float32(edge) / 2):.3g}, "
      f"{above:.0%} at or above it, where it is {np.spacing(np.float32(edge)):.3g}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
bins = np.arange(min(e.min() for e in errors.values()) - 0.5, max(e.max() for e in errors.values()) + 1.5)
for m, e in errors.items():
    ax1.hist(e, bins=bins, histtype="step", lw=1.5, label=m)
ax1.set_xlabel("error of the FP32 result, in ulps of the correctly rounded result")
ax1.set_ylabel("number of outputs (of 48 x 48)")
ax1.set_title(f"In ulps: two peaks per model, as the ulp doubles at {edge:g}")
# Bins 2 units wide: an FP32 result's relative error moves in steps of 1 to 2 units.
rbins = np.arange(np.floor(min(e.min() for e in relative.values())) - 1,
                  max(e.max() for e in relative.values()) + 3, 2)
for m, e in relative.items():
    ax2.hist(e, bins=rbins, histtype="step", lw=1.5, label=m)
ax2.set_xlabel("relative error of the FP32 result, in units of u = 2**-24")
ax2.set_title("Relative to the exact result: one peak per model")
# One legend for both panels (the same colours), beside the right one.
ax2.legend(title="model", loc="upper left", bbox_to_anchor=(1.01, 1.0))
fig.suptitle("FP16 inputs uniform in [0, 1), K = 256: error against the exact product")
fig.tight_layout()

# %% [markdown]
# In ulps (left) each Tensor Core model has two peaks. The results straddle a power of
# two (the line above says which, and how many lie on each side), and the FP32 ulp
# doubles there: an absolute error of about the same size counts twice as many ulps
# of a result just below the power of two as of one just above it. Divided by the
# exact result instead (right), the errors of results on both sides fall together,
# and each model has one peak; its position is the model's bias, and the order
# (V100 worst, then A100, then H100) that of their alignment bits and block widths.
