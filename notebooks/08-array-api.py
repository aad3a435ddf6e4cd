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
# # 8. scikit-learn and SciPy in BF16: the array API
#
# `lp.array_namespace(fmt)` is a namespace of the Python array API standard in which
# every floating array is stored and computed in `fmt`, whatever dtype the code asks
# for. Libraries written against the standard run on it unchanged: scikit-learn with
# `array_api_dispatch=True` and SciPy with `SCIPY_ARRAY_API=1`. This notebook fits two
# scikit-learn estimators and evaluates four SciPy functions in FP32, BF16 and FP16,
# and compares each with the same call in float64 NumPy. The expectation: relative
# differences of a few unit roundoffs `u` of the format (FP32 `2**-24`, FP16 `2**-11`,
# BF16 `2**-8`), times the condition of the problem.
#
# `SCIPY_ARRAY_API` must be set before SciPy (or scikit-learn, which needs SciPy's
# support) is imported.

# %%
import os

os.environ["SCIPY_ARRAY_API"] = "1"

import matplotlib.pyplot as plt
import numpy as np
import scipy.special
import scipy.stats
import sklearn
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import Ridge

import lowprec as lp

FORMATS = ["fp32", "bf16", "fp16"]
U = {f: lp.format(f).unit_roundoff for f in FORMATS}
print(U)

# %% [markdown]
# ## The data
#
# A regression problem (200 samples, 5 features, a linear target plus noise) and a
# two-class problem on the same samples; fixed seeds.

# %%
rng = np.random.default_rng(0)
X = rng.standard_normal((200, 5))
y = X @ rng.standard_normal(5) + 0.1 * rng.standard_normal(200)
labels = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
z = rng.standard_normal(1000)


def rel(got, want):
    """max |got - want| / max |want|, on the float64 values of `got`."""
    return float(np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)))


# %% [markdown]
# ## scikit-learn: `Ridge` and `LinearDiscriminantAnalysis`
#
# Both with solver `"svd"` (scikit-learn's array-API code paths take only it). In a
# policy namespace the SVD is NumPy's float64 LAPACK result rounded once into the
# format (docs/array-api.md); everything around it (centring, scaling, the products
# with the singular vectors) is rounded operation by operation. The fitted
# coefficients are `Array` objects of the namespace; `.tensor` shows their format.

# %%
ridge64 = Ridge(alpha=1.0, solver="svd").fit(X, y)
lda64 = LinearDiscriminantAnalysis(solver="svd").fit(X, labels)
results = {}
for fmt in FORMATS:
    xp = lp.array_namespace(fmt)
    with sklearn.config_context(array_api_dispatch=True):
        ridge = Ridge(alpha=1.0, solver="svd").fit(xp.asarray(X), xp.asarray(y))
        lda = LinearDiscriminantAnalysis(solver="svd").fit(xp.asarray(X), xp.asarray(labels))
        predicted = lda.predict(xp.asarray(X))
    results[fmt] = {
        "Ridge coef_": rel(ridge.coef_, ridge64.coef_),
        "LDA coef_": rel(lda.coef_, lda64.coef_),
    }
    agree = np.mean(np.asarray(predicted) == lda64.predict(X))
    print(f"{fmt}: Ridge coef_ in {ridge.coef_.tensor.fmt}, LDA predictions agreeing "
          f"with float64: {agree:.1%}")

# %% [markdown]
# ## SciPy: `logsumexp`, `softmax`, `zscore`, `ttest_1samp`
#
# Each called on a 1000-element array of the namespace. SciPy computes with the
# namespace's functions (`exp`, `log`, `sum`, `mean`, `std`, ...), so every step is
# rounded in the format.

# %%
scipy_calls = {
    "logsumexp": lambda a: scipy.special.logsumexp(a),
    "softmax": lambda a: scipy.special.softmax(a),
    "zscore": lambda a: scipy.stats.zscore(a),
    "ttest_1samp": lambda a: scipy.stats.ttest_1samp(a, 0.0).statistic,
}
for fmt in FORMATS:
    xp = lp.array_namespace(fmt)
    for name, call in scipy_calls.items():
        results[fmt][name] = rel(call(xp.asarray(z)), np.asarray(call(z)))

print(f"{'':14}" + "".join(f"{f:>22}" for f in FORMATS))
for key in results["fp32"]:
    row = "".join(f"{results[f][key]:>12.2e} ({results[f][key] / U[f]:5.2f} u)" for f in FORMATS)
    print(f"{key:14}{row}")

# %% [markdown]
# ## The picture
#
# Each difference from float64 divided by the format's unit roundoff: points near 1
# (between about 0.1 and 10) mean the computation ran in that format with errors of
# its own size; a point far below would mean it secretly ran in float64.

# %%
keys = list(results["fp32"])
fig, ax = plt.subplots(figsize=(7, 3.5))
for i, fmt in enumerate(FORMATS):
    ratios = [results[fmt][k] / U[fmt] for k in keys]
    ax.plot(np.arange(len(keys)) + 0.1 * (i - 1), ratios, "o", label=fmt.upper())
ax.set_xticks(range(len(keys)), keys, rotation=20)
ax.set_yscale("log")
ax.axhline(1.0, color="gray", lw=0.8)
ax.set_ylabel("relative difference / u")
ax.set_title("scikit-learn and SciPy on lp.array_namespace(fmt) vs float64")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## What does not run
#
# Code that calls NumPy's own functions on its inputs instead of the namespace's is
# refused rather than silently computed in float64. `LinearDiscriminantAnalysis` with
# solver `"eigen"` calls `np.unique` on the labels:

# %%
xp = lp.array_namespace("bf16")
try:
    with sklearn.config_context(array_api_dispatch=True):
        LinearDiscriminantAnalysis(solver="eigen").fit(xp.asarray(X), xp.asarray(labels))
except TypeError as err:
    print("TypeError:", err)
