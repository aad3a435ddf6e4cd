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
# # 9. Sweeps on a Dask cluster
#
# An experiment with low-precision arithmetic is usually a sweep: the same measurement
# over input formats, hardware models and sizes. `lp.sweep(fn, grid, client=...)` runs
# `fn(**point)` at every point of a grid, here or as one task per point on a
# [Dask](https://distributed.dask.org) cluster, and returns one record per point, in
# grid order. Each point gets its own seed, a function of the sweep's `seed` and the
# point's values only (`lowprec.sweeps.point_seed`), so a point's record does not
# depend on where it ran, on the worker count, or on which other points the grid has.
#
# Here: the error of matrix products `A @ B` with inputs in FP16, BF16 and FP8 E4M3,
# under four `lp.matmul` models, for inner dimensions K from 64 to 4096, on a local
# cluster of two worker processes. The same code runs on a cluster of many machines
# with only the `Client` changed (docs/scale-out.md).
#
# Every number below is computed as the notebook runs.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from dask.distributed import Client, LocalCluster

import lowprec as lp
from lowprec.sweeps import sweep

# %% [markdown]
# ## The measurement
#
# One point: `A` (32 x K) and `B` (K x 32) with entries uniform in [0, 1), rounded to the
# input format first (RNE), so that the error measured is the model's accumulation and
# output rounding alone. The reference is the float64 product of the same rounded
# inputs: its own error (at most about `K 2**-53` relative, below `5e-13` here) is far
# under anything measured. With all terms positive there is no cancellation, and the
# relative error of every output is meaningful; the record keeps its median and
# maximum over the 1024 outputs.
#
# The function takes a `seed` parameter, so `sweep` passes it the point's seed.

# %%
def matmul_error(fmt, model, K, seed):
    """Relative error of lp.matmul under ``model`` for 32 x K x 32 products of
    inputs in ``fmt``, against the float64 product of the same inputs."""
    rng = np.random.default_rng(seed)
    a = lp.round(rng.random((32, K)), fmt)
    b = lp.round(rng.random((K, 32)), fmt)
    exact = a @ b                             # float64; error below 5e-13 relative
    d = lp.matmul(a, b, model=model, in_fmt=fmt)
    rel = np.abs(d - exact) / exact
    return {"median": float(np.median(rel)), "max": float(rel.max())}

# %% [markdown]
# ## The sweep on a local cluster
#
# `LocalCluster` starts a scheduler and two worker processes on this machine;
# `sweep` sends `matmul_error` (pickled with cloudpickle) and each point to them, one
# task per point, and gathers the results in grid order. The grid is a dict, so its
# points are the Cartesian product, the last name (K) varying fastest.

# %%
grid = {"fmt": ["fp16", "bf16", "e4m3"],
        "model": ["exact", "fp32", "h100", "b200"],
        "K": [64, 256, 1024, 4096]}

cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                       dashboard_address=None)
client = Client(cluster)
start = time.perf_counter()
rows = sweep(matmul_error, grid, client=client, seed=0, records="list")
print(f"{len(rows)} points on {len(client.scheduler_info()['workers'])} workers in "
      f"{time.perf_counter() - start:.1f} s")
print(f"{'fmt':5} {'model':6} {'K':>5} {'seed':>20} {'median':>9} {'max':>9}")
for r in rows[:8]:
    print(f"{r['fmt']:5} {r['model']:6} {r['K']:5d} {r['seed']:20d} "
          f"{r['median']:9.2e} {r['max']:9.2e}")
print("...")

# %% [markdown]
# `records="list"` asks for a list of dicts; the default, `"auto"`, gives a pandas
# `DataFrame` when pandas is installed.
#
# ## Error against K

# %%
Ks = np.array(grid["K"])
styles = {"exact": ("k", "o"), "fp32": ("tab:blue", "s"), "h100": ("tab:red", "^"),
          "b200": ("tab:green", "v")}
u32 = lp.FP32.unit_roundoff
fig, axes = plt.subplots(1, 3, figsize=(13, 4.5), sharey=True)
for ax, fmt in zip(axes, grid["fmt"]):
    for model in grid["model"]:
        colour, marker = styles[model]
        sel = [r for r in rows if r["fmt"] == fmt and r["model"] == model]
        median = np.array([r["median"] for r in sel])
        top = np.array([r["max"] for r in sel])
        # an error 0 (every output exact) is drawn at u32 / 16, the bottom of the axis
        ax.plot(Ks, np.maximum(median, u32 / 16), marker=marker, color=colour,
                label=f"{model} (median)")
        ax.plot(Ks, np.maximum(top, u32 / 16), marker=marker, color=colour, ls=":",
                alpha=0.6, label=f"{model} (max)")
    ax.axhline(u32, color="0.6", lw=1, label="FP32's u = 2**-24")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(u32 / 16, 1)
    ax.set_title(f"inputs {lp.format(fmt).name}")
    ax.set_xlabel("K (inner dimension)")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("relative error of the outputs")
axes[0].legend(fontsize=7, loc="upper left")
fig.suptitle("32 x K x 32 products of uniform [0, 1) inputs: error against K under four "
             "matmul models")
fig.tight_layout()

# %%
def slope(fmt, model, key="median"):
    """The least-squares slope of log2(error) against log2(K), over the K where the
    error is not 0."""
    e = np.array([r[key] for r in rows if r["fmt"] == fmt and r["model"] == model])
    return float(np.polyfit(np.log2(Ks[e > 0]), np.log2(e[e > 0]), 1)[0])

for fmt in grid["fmt"]:
    at_k = {m: [r["median"] for r in rows if r["fmt"] == fmt and r["model"] == m][-1]
            for m in grid["model"]}
    print(f"{fmt:5} K = {Ks[-1]}: median error " + ", ".join(
        f"{m} {e:.1e}" for m, e in at_k.items()))
    print("      slope of log error against log K: " + ", ".join(
        f"{m} {slope(fmt, m):.2f}" for m in grid["model"] if m != "exact"))

# %% [markdown]
# What the figure shows:
#
# - `exact` (the exact dot products, rounded once to FP32) stays at FP32's rounding
#   floor whatever K: every output within `u = 2**-24` of the reference.
# - `fp32` (a sequential sum in FP32, each addition rounded to nearest) grows slowly,
#   about like `sqrt(K) u` (a slope near 1/2 for FP16, a little more for BF16, whose
#   short sums are often exact in FP32): round-to-nearest errors of both signs partly
#   cancel.
# - `h100` and `b200` on FP16 and BF16 are the same model (NVIDIA's fused dot-add:
#   the products of a block aligned to the largest exponent and cut to 25 fraction
#   bits, toward zero), so the green line hides the red one. The cuts all lose
#   magnitude, nothing cancels, and the error grows about in proportion to K (a slope
#   a little above 1): above `fp32`'s at every K here, by a factor that grows with K.
# - With E4M3 inputs the two part: Hopper's FP8 path (`h100`) keeps only 13 fraction
#   bits of the sum (`e8m13`, the "about 14 bits" the DeepSeek-V3 report measured on
#   H800), and its error reaches several percent at K = 4096; Blackwell's (`b200`)
#   keeps 25 bits, and its error stays below `1e-6`. This is why FP8
#   training on Hopper promotes partial sums to FP32 every 128 products
#   (docs/tensor-cores.md). Errors of 0 (every output exact: products of 4-bit
#   significands and their short sums fit in FP32) are drawn at the bottom.
#
# ## The same records without the cluster
#
# Run locally, in this process, the sweep gives the same records: each point's seed
# depends on the sweep's seed and the point's values only, and `lp.matmul` is
# deterministic. A point run alone, or in another grid, gets the same seed and record
# too.

# %%
start = time.perf_counter()
local = sweep(matmul_error, grid, seed=0, records="list")
print(f"locally in {time.perf_counter() - start:.1f} s; the same records as on the "
      f"cluster: {local == rows}")
alone = sweep(matmul_error, [{"K": 1024, "model": "h100", "fmt": "e4m3"}], records="list")
print("one point alone:", alone[0])
print("the same point in the full grid:",
      next(r for r in rows if (r["fmt"], r["model"], r["K"]) == ("e4m3", "h100", 1024)))

# %% [markdown]
# On two cores the cluster gains little over the local loop (each point takes a few
# milliseconds to a few tenths of a second, and the workers start in about a second);
# the same call spreads a grid of thousands of larger points over every core of a
# cluster. docs/scale-out.md shows how to connect to one (SLURM or PBS through
# dask-jobqueue, SSH, Kubernetes), what travels over the network and what stays
# deterministic.
#
# Close the client and the cluster when done:

# %%
client.close()
cluster.close()
